"""Business rules of the service, independent of HTTP."""
