// The worker's API takes a Logger, so importing Worker brings the Logging module with it.
@_exported import Logging
