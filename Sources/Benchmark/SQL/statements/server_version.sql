-- The server's version, for the figures' heading.
SHOW server_version
