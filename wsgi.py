"""gunicorn's entry point: ``gunicorn -c gunicorn.conf.py wsgi:app``."""

from __future__ import annotations

import sys

from app import create_app
from app.config import ConfigError

try:
    app = create_app()
except ConfigError as exc:
    # An operator's mistake, not a bug: say what is wrong, without a traceback.
    print(exc, file=sys.stderr)
    raise SystemExit(1) from None
