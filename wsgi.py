"""gunicorn's entry point: ``gunicorn -c gunicorn.conf.py wsgi:app``."""

from __future__ import annotations

import sys

from app import create_app
from app.config import ConfigError
from app.models.process_role import ProcessRole

try:
    # The role gunicorn's settings read too: a runner's port serves only probes and metrics.
    app = create_app(role=ProcessRole.from_environment())
except ConfigError as exc:
    # An operator's mistake, not a bug: say what is wrong, without a traceback.
    print(exc, file=sys.stderr)
    raise SystemExit(1) from None
