// Text shaped for one cell of an operator's table (herald dead list, the dashboard's pages).
extension String {
    /// Line breaks as spaces, for one table cell.
    func replacingNewlines() -> String {
        String(map { $0 == "\n" || $0 == "\r" ? " " : $0 })
    }
}
