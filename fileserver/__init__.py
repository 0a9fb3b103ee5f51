"""A user's file server: WebDAV on the file systems their lab sees, run by the file-server image.

One process serves one user, under the URL prefix ``/files/<user>``: each configured mount at
``<prefix>/<name>/``, read-only where configured (a write there answers 403), and at
``<prefix>/`` a read-only listing of the mounts. It is built on wsgidav (the WebDAV protocol
and its file-system provider) served by cheroot.

It has no authentication of its own: Gafaelfawr, at the ingress in front of it, authenticates
the caller, admits only this user and does not pass the token on. The server never logs a
header or a query string, so no token reaches its log even if one is sent.

It never serves anything outside the mounts: a symbolic link inside a mount whose target lies
outside that mount (elsewhere, or in another mount) is neither listed nor followed, and a path
through it answers 403; links that stay inside the mount work as the files they point at.

It exits with status 0 by itself after an idle timeout (no request begun or in flight for that
long), and at once on SIGTERM or SIGINT, after letting the requests in flight end (for up to
20 seconds). Its log has one line per request: method, path, status and duration.

Configuration, from the environment:

``FILESERVER_USER`` (required)
    The user served, a username as Gafaelfawr spells it (lowercase letters, digits, single
    hyphens between them); it names the default URL prefix.
``FILESERVER_MOUNTS`` (required)
    A JSON list of the mounts, each ``{"name": "home", "path": "/home/rachel",
    "readOnly": false}``: ``name`` is the mount's URL segment (lowercase letters, digits,
    ``.``, ``_``, ``-``; distinct), ``path`` an absolute path to an existing directory,
    ``readOnly`` optional (default false).
``FILESERVER_URL_PREFIX``
    The path the server answers under (default ``/files/<user>``), in lowercase; any other
    path answers 404.
``FILESERVER_PORT``
    The TCP port (default 8000).
``FILESERVER_HOST``
    The address to listen on (default ``0.0.0.0``, every interface of the pod).
``FILESERVER_IDLE_TIMEOUT``
    Seconds without a request after which the server exits (default 3600; a positive number).

A configuration it cannot use is reported on standard error, naming the variable, and the
process exits with status 2.
"""
