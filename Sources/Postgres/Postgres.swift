// The Postgres module; see README.md, Architecture.
