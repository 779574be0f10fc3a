// The FCM module; see README.md, Architecture.
