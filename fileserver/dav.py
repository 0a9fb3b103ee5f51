"""The WebDAV application: a wsgidav share per mount under the prefix, and the prefix's own
listing, configured through wsgidav's documented options."""

from __future__ import annotations

from wsgidav.error_printer import ErrorPrinter
from wsgidav.http_authenticator import HTTPAuthenticator
from wsgidav.request_resolver import RequestResolver
from wsgidav.wsgidav_app import WsgiDAVApp

from fileserver.config import Settings
from fileserver.listing import MountList
from fileserver.mounts import MountProvider


def dav_app(settings: Settings) -> WsgiDAVApp:
    """The application for ``settings``.

    The shares are named by their full path (``/files/rachel/home``) rather than through
    wsgidav's ``mount_path``, with which wsgidav refuses every MOVE and COPY (it looks the
    destination's share up with the prefix still on it). A path outside the prefix matches no
    share and answers 404.

    The authenticator stays in the middleware, configured to let everyone through without
    reading any header (Gafaelfawr has authenticated the caller at the ingress): it is what
    names the anonymous principal that wsgidav's locks, needed by clients that write (macOS
    Finder mounts a server without locks read-only), are held by. The directory browser is
    left out: its assets and redirects live outside the prefix, where the ingress does not
    route, so a web browser's GET of a folder answers 403; the server is for WebDAV clients.
    Locks and dead properties are kept in memory, for the life of the process.
    """
    providers: dict[str, object] = {settings.prefix: MountList(settings.mounts)}
    for mount in settings.mounts:
        providers[f"{settings.prefix}/{mount.name}"] = MountProvider(mount)
    return WsgiDAVApp(
        {
            "provider_mapping": providers,
            "middleware_stack": [ErrorPrinter, HTTPAuthenticator, RequestResolver],
            "http_authenticator": {
                "domain_controller": None,
                "accept_basic": False,
                "accept_digest": False,
                "default_to_digest": False,
            },
            "simple_dc": {"user_mapping": {"*": True}},
            "lock_storage": True,
            "property_manager": True,
            # wsgidav's own request lines are off (they name the Destination header):
            # fileserver.access_log writes one line per request.
            "verbose": 2,
            "logging": {"enable": False},
            "suppress_version_info": True,
        }
    )
