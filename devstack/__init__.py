"""The local stack: emulators of Kubernetes, Gafaelfawr and a Docker registry.

Everything here speaks the real protocol over HTTP on loopback so the service and its tests
use their ordinary clients. The service package (``app``) never imports this package.
"""
