// The HTTPClient module; see README.md, Architecture.
