// The Emulator module; see README.md, Architecture.
