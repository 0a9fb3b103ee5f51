"""Routes for administrators: the service's own state."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.extensions import labs_ext
from app.openapi import documented
from app.schemas.admin import OperationStatusSchema
from app.services.admin import operations_in_progress
from app.services.auth import ADMIN
from app.web.auth import requires

admin = Blueprint("admin", __name__, url_prefix="/spawner/v1")

_operations_schema = OperationStatusSchema(many=True)


@admin.get("/operations")
@documented(responses={200: OperationStatusSchema(many=True)})
@requires(ADMIN)
def list_operations() -> Response:
    """Spawns and deletes in progress, with the worker running each."""
    return jsonify(_operations_schema.dump(operations_in_progress(labs_ext.context)))
