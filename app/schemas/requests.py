"""What the bodies asking for a workload beside a user's lab (a compute cluster, a kernel, a
group's app) check alike: the image chosen, and the environment given."""

from __future__ import annotations

import json

from marshmallow import ValidationError, fields, validate

ENV_NAME = validate.Regexp(
    r"^[A-Za-z_][A-Za-z0-9_]{0,127}$", error="must be an environment variable name"
)
"""A variable's name in a request's ``env``: at most 128 characters."""


def check_env_size(env: dict[str, str], *, variables: int, json_bytes: int) -> None:
    """Refuse an ``env`` of more than ``variables`` variables or ``json_bytes`` bytes as JSON
    (escapes counted, so no choice of characters can inflate it): it goes into an object's
    spec, which Kubernetes bounds."""
    if len(env) > variables:
        raise ValidationError(f"at most {variables} variables ({len(env)})", "env")
    size = len(json.dumps(env))
    if size > json_bytes:
        raise ValidationError(f"at most {json_bytes} bytes as JSON ({size})", "env")


def lab_image_field() -> fields.String:
    """A request's ``image``: one its user may spawn, the lab's when none is given."""
    return fields.String(
        load_default=None,
        metadata={"description": "An image the user may spawn; by default the lab's."},
    )
