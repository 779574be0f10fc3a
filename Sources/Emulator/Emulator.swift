// The Emulator module; see docs/architecture.md.
