"""HTTP routes, one blueprint per area. Each is thin: parse, authorize, call a service."""
