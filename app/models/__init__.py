"""Plain data objects passed between the layers of the service."""
