"""Clients of what the service talks to: Redis, Kubernetes, Gafaelfawr and registries."""
