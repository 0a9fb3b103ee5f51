"""The lab tests' fixtures, for clusters run beside labs."""

from tests.labs.conftest import admin_headers, lab_raw_config, new_user

__all__ = ["admin_headers", "lab_raw_config", "new_user"]
