"""The app factory's body: builds the Flask app and its per-process machinery."""

from __future__ import annotations

from collections.abc import Sequence

from flask import Flask

from app.config import Config, load_config
from app.extensions import (
    api_ext,
    gafaelfawr_ext,
    kubernetes_ext,
    labs_ext,
    limits_ext,
    redis_ext,
)
from app.log import configure_logging
from app.models.process_role import ProcessRole
from app.web import request_id
from app.web.errors import register_error_handlers
from app.workloads.kinds import KINDS, KindFactory


def build_app(
    config: Config | None = None,
    kinds: Sequence[KindFactory] = KINDS,
    *,
    role: ProcessRole = ProcessRole.ALL,
) -> Flask:
    """Build the service from ``config``, or from the file named by the environment.

    ``kinds`` are the kinds of workload the engine runs (a test adds one of its own); see
    ``app.create_app`` for why a built app can be shared by forked processes.
    """
    if config is None:
        config = load_config()
    configure_logging(config.log_level, config.log_format)

    app = Flask(__name__)
    app.config["SPAWNER"] = config
    app.config["SPAWNER_ROLE"] = role
    # Werkzeug refuses a larger body with 413 before anything reads it.
    app.config["MAX_CONTENT_LENGTH"] = config.limits.max_body_bytes
    app.json.sort_keys = False  # type: ignore[attr-defined]
    request_id.init_app(app)

    redis_ext.init_app(app, config.redis)
    kubernetes_ext.init_app(app, config.kubernetes)
    gafaelfawr_ext.init_app(app, config)
    labs_ext.init_app(app, config, kinds)
    limits_ext.init_app(app, config)
    api_ext.init_app(app)

    # After flask-smorest's: these render every error in the service's one error shape.
    register_error_handlers(app)

    from blueprints.health import health
    from blueprints.metrics import metrics_bp

    if not role.serves_requests:
        # A runner's port is for its kubelet and its scraper: nothing routes users there, so
        # it does not import the API's routes (4 MiB and 0.06 s of CPU less in the runner).
        for blueprint in (health, metrics_bp):
            api_ext.register_blueprint(app, blueprint)
        return app

    from blueprints.admin import admin
    from blueprints.admin_pod import admin_pod
    from blueprints.apps import apps
    from blueprints.clusters import clusters
    from blueprints.docs import docs
    from blueprints.fileservers import fileservers
    from blueprints.kernels import kernels
    from blueprints.nublado import nublado
    from blueprints.prepull import prepull
    from blueprints.scaler import scaler
    from blueprints.spawner import spawner

    for blueprint in (
        health,
        metrics_bp,
        spawner,
        nublado,
        clusters,
        kernels,
        apps,
        fileservers,
        scaler,
        prepull,
        admin,
        admin_pod,
        docs,
    ):
        api_ext.register_blueprint(app, blueprint)
    return app
