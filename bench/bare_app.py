"""The bare route the status benchmark compares against: one Flask route, no auth, no Redis.

Run under the service's own ``gunicorn.conf.py`` so only the application differs.
"""

from __future__ import annotations

from flask import Flask, Response, jsonify

app = Flask(__name__)


@app.get("/spawner/v1/labs/<username>")
def lab(username: str) -> Response:
    """Same path shape as the status route, so the load generator sends the same requests."""
    return jsonify({"username": username, "status": "running"})


@app.get("/readyz")
def ready() -> Response:
    return jsonify({"status": "ok"})
