"""Users' file servers: WebDAV on demand to the file systems a user's lab sees."""
