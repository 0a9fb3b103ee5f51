"""The Gafaelfawr emulator's login and logout pages, where ``loginRedirect`` sends a browser.

Real Gafaelfawr's ``/login`` runs an OAuth or OpenID Connect flow and ends by setting its
session cookie and sending the browser back to ``rd``. The emulator has no identity provider:
its login page asks for a token (one of the demo tokens from ``stack.json``), sets the
``gafaelfawr`` cookie to it and sends the browser back. Cookies do not tell ports apart, so the
cookie set here, on one loopback port, comes with requests to the ingress proxy on another.
Only loopback ``rd`` addresses are followed, as Gafaelfawr follows only its own domain's.
"""

from __future__ import annotations

import html
from urllib.parse import urlsplit

from werkzeug.wrappers import Response

from devstack.gafaelfawr_ingress import COOKIE_NAME, json_response

_LOOPBACK_HOSTS = ("localhost", "::1")


def is_local_url(url: str) -> bool:
    """Whether a return URL (or a CORS origin) may be trusted: an http(s) URL on this
    machine."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    return parts.scheme in ("http", "https") and (
        host.startswith("127.") or host in _LOOPBACK_HOSTS
    )


def bad_redirect(url: str) -> Response:
    return json_response(
        422, {"detail": [{"msg": f"Invalid return URL: {url}", "type": "invalid_return_url"}]}
    )


def login_form(return_url: str, message: str = "", status: int = 200) -> Response:
    """A form asking for a token; it posts back to ``/login`` with the return URL."""
    note = f"<p><strong>{html.escape(message)}</strong></p>" if message else ""
    page = (
        "<!doctype html><title>Log in (Gafaelfawr emulator)</title>"
        "<h1>Log in</h1>"
        "<p>This is the local stack's Gafaelfawr: paste a token (see "
        "<code>.devstack/stack.json</code>).</p>"
        f"{note}"
        '<form method="post" action="login">'
        f'<input type="hidden" name="rd" value="{html.escape(return_url, quote=True)}">'
        '<input name="token" size="60" autofocus> <button>Log in</button>'
        "</form>"
    )
    return Response(page, status=status, mimetype="text/html")


def logged_in(return_url: str, token: str) -> Response:
    """Set the session cookie and send the browser on (or say who it now is)."""
    response = _onward(return_url, "Logged in.")
    response.set_cookie(COOKIE_NAME, token, path="/", httponly=True, samesite="Lax")
    return response


def logged_out(return_url: str) -> Response:
    response = _onward(return_url, "Logged out.")
    response.delete_cookie(COOKIE_NAME, path="/", httponly=True, samesite="Lax")
    return response


def _onward(return_url: str, text: str) -> Response:
    if return_url:
        return Response(status=303, headers={"Location": return_url})
    return Response(text, mimetype="text/plain")
