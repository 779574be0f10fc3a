// The Crypto module; see README.md, Architecture.
