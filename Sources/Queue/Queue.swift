// The Queue module; see README.md, Architecture.
