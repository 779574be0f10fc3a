import Foundation
import JSON
import Queue

/// Building blocks of the pages: escaping, the layout every page shares, the throughput chart.
/// Every value from the database or the request goes through `escape` before it reaches HTML.
enum HTML {
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(character)
            }
        }
        return out
    }

    struct NavigationItem {
        var path: String
        var title: String
    }

    /// The pages in the navigation bar; a new page adds itself here and to `Dashboard.routes`.
    static let navigation = [
        NavigationItem(path: "/", title: "Overview"),
        NavigationItem(path: "/dead-letters", title: "Dead letters"),
        NavigationItem(path: "/campaigns", title: "Campaigns"),
        NavigationItem(path: "/admin-log", title: "Admin log"),
    ]

    /// The page around `body`: title, navigation, the read-only banner, the logout button.
    static func layout(title: String, current: String, body: String, dashboard: Dashboard, session: Session?) -> String {
        let links = navigation.map { item in
            "<a href=\"\(item.path)\"\(item.path == current ? " class=\"current\"" : "")>\(escape(item.title))</a>"
        }.joined()
        var account = ""
        if let session {
            account = "<form method=\"post\" action=\"/logout\" class=\"logout\">\(csrfField(session))<button>Log out</button></form>"
        }
        let banner = dashboard.access.isProtected ? "" : """
            <p class="banner">Read-only: this dashboard has no token. Set <code>HERALD_DASHBOARD_TOKEN</code> and restart it to retry, discard, pause and cancel from here.</p>
            """
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(escape(title)) · Herald</title><style>\(style)</style></head>
            <body><header><strong>Herald</strong><nav>\(links)</nav>\(account)</header>
            <main>\(banner)<h1>\(escape(title))</h1>
            \(body)
            </main></body></html>
            """
    }

    static func csrfField(_ session: Session?) -> String {
        guard let session else { return "" }
        return "<input type=\"hidden\" name=\"\(Access.csrfField)\" value=\"\(escape(session.csrfToken))\">"
    }

    /// A POST form of one button, disabled on a read-only dashboard.
    static func actionButton(_ label: String, action: String, fields: [(String, String)] = [], session: Session?,
                             dashboard: Dashboard, danger: Bool = false) -> String {
        let hidden = fields.map { "<input type=\"hidden\" name=\"\(escape($0.0))\" value=\"\(escape($0.1))\">" }.joined()
        let disabled = dashboard.access.isProtected ? "" : " disabled title=\"read-only: set HERALD_DASHBOARD_TOKEN\""
        return "<form method=\"post\" action=\"\(escape(action))\" class=\"inline\">\(csrfField(session))\(hidden)<button class=\"\(danger ? "danger" : "primary")\"\(disabled)>\(escape(label))</button></form>"
    }

    /// Completed (blue), errors (red: discarded and dead) and cancelled (grey: withdrawn, not an
    /// error) per minute over the last hour, as an inline SVG: no script, no image request.
    static func throughputChart(_ throughput: Throughput) -> String {
        let width = 720.0, height = 140.0, bottom = 120.0, left = 40.0
        let highest = max(1, throughput.minutes.map { max($0.completed, $0.discarded + $0.dead, $0.cancelled) }.max() ?? 1)
        let slot = (width - left) / Double(max(1, throughput.minutes.count))
        var bars = ""
        func bar(_ x: Double, _ share: Double, _ count: Int, _ colour: String, _ title: String) {
            guard count > 0 else { return }
            let tall = Double(count) / Double(highest) * (bottom - 10)
            bars += "<rect x=\"\(fmt(x))\" y=\"\(fmt(bottom - tall))\" width=\"\(fmt(slot * share))\" height=\"\(fmt(tall))\" fill=\"\(colour)\"><title>\(title)</title></rect>"
        }
        for (index, minute) in throughput.minutes.enumerated() {
            let x = left + Double(index) * slot
            bar(x + 1, 0.45, minute.completed, "#3b6fd8", "\(minute.completed) completed")
            bar(x + 1 + slot * 0.45, 0.25, minute.discarded + minute.dead, "#d8453b", "\(minute.discarded) discarded, \(minute.dead) dead")
            bar(x + 1 + slot * 0.7, 0.2, minute.cancelled, "#a9b0bf", "\(minute.cancelled) cancelled")
        }
        let total = throughput.total
        return """
            <svg class="chart" viewBox="0 0 \(Int(width)) \(Int(height))" role="img" aria-label="Jobs finished per minute over the last hour">
            <line x1="\(Int(left))" y1="\(Int(bottom))" x2="\(Int(width))" y2="\(Int(bottom))" stroke="#999"/>
            <text x="\(Int(left) - 4)" y="14" text-anchor="end" font-size="11">\(highest)</text>
            <text x="\(Int(left) - 4)" y="\(Int(bottom))" text-anchor="end" font-size="11">0</text>
            <text x="\(Int(left))" y="\(Int(bottom) + 16)" font-size="11">60 min ago</text>
            <text x="\(Int(width))" y="\(Int(bottom) + 16)" text-anchor="end" font-size="11">now</text>
            \(bars)</svg>
            <p class="legend"><span class="swatch blue"></span> completed (\(total.completed) in the hour)
            <span class="swatch red"></span> errors: discarded \(total.discarded), dead \(total.dead)
            <span class="swatch grey"></span> cancelled \(total.cancelled)</p>
            """
    }

    static func fmt(_ value: Double) -> String { String(format: "%.1f", value) }

    /// A time in words (`3 min 5 s`); a dash where there is none.
    static func formatAge(_ seconds: Double?) -> String { seconds.map { durationText($0, units: .words, roundedDown: true) } ?? "–" }

    static let style = """
        body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2330;background:#f5f6f8}
        header{display:flex;align-items:center;gap:24px;background:#1d2330;color:#fff;padding:10px 24px}
        header nav a{color:#c9d2e3;text-decoration:none;margin-right:16px}header nav a.current{color:#fff;font-weight:600}
        header .logout{margin-left:auto}main{padding:8px 24px 40px;max-width:1200px}
        h1{font-size:20px;margin:16px 0}h2{font-size:16px;margin:24px 0 8px}
        table{border-collapse:collapse;background:#fff;width:100%;margin-bottom:12px}
        th,td{text-align:left;padding:6px 10px;border-bottom:1px solid #e3e6eb;vertical-align:top}
        th{font-weight:600;background:#eef0f4}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
        .banner{background:#fff4d6;border:1px solid #e8c66a;padding:8px 12px;border-radius:4px}
        .notice{background:#e3f4e6;border:1px solid #8cc79a;padding:8px 12px;border-radius:4px}
        .warning{background:#fde8e6;border:1px solid #e59a92;padding:8px 12px;border-radius:4px}
        .letter{background:#fff;border:1px solid #e3e6eb;border-radius:4px;padding:10px 14px;margin-bottom:10px}
        .letter .meta{color:#5a6275;font-size:13px}.letter .reason{font-weight:600;margin:4px 0;word-break:break-word}
        pre{background:#f0f2f5;padding:8px;overflow:auto;max-height:240px;margin:6px 0;font-size:12px;white-space:pre-wrap;word-break:break-all}
        form.inline{display:inline}button{font:inherit;padding:4px 12px;border-radius:4px;border:1px solid #8a93a6;background:#fff;cursor:pointer}
        button.primary{background:#3b6fd8;border-color:#3b6fd8;color:#fff}button.danger{background:#fff;border-color:#d8453b;color:#b3261e}
        button[disabled]{opacity:.45;cursor:not-allowed}input[type=text],input[type=password]{font:inherit;padding:4px 8px;border:1px solid #b8bfcc;border-radius:4px}
        .filters{background:#fff;padding:10px 14px;border:1px solid #e3e6eb;border-radius:4px;margin-bottom:12px}
        .filters label{margin-right:12px}.chart{width:100%;max-width:720px;background:#fff;border:1px solid #e3e6eb}
        .legend{font-size:13px;color:#5a6275}.swatch{display:inline-block;width:10px;height:10px;margin:0 4px 0 10px}
        .swatch.blue{background:#3b6fd8}.swatch.red{background:#d8453b}.swatch.grey{background:#a9b0bf}.est{color:#8a93a6}
        details summary{cursor:pointer;color:#3b6fd8}a{color:#3b6fd8}#job th{width:180px}
        .bar{display:flex;height:14px;background:#eef0f4;border:1px solid #d5d9e0;border-radius:3px;overflow:hidden;margin:6px 0}
        .bar .seg{display:block;height:100%}
        """
}
