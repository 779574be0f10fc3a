// The Worker module; see README.md, Architecture.
