"""Client of the lab spawner service, and its JupyterHub spawner (:mod:`labspawner.hub`).

>>> from labspawner import LabSpawnerClient
>>> client = LabSpawnerClient()            # LAB_SPAWNER_URL and ACCESS_TOKEN inside a lab
>>> client.user_status().status            # doctest: +SKIP
'running'
"""

from labspawner.client import LabSpawnerClient
from labspawner.errors import (
    AppFailedError,
    ClusterFailedError,
    ConflictError,
    InvalidRequestError,
    KernelFailedError,
    LabFailedError,
    LabSpawnerError,
    NotAuthenticatedError,
    NotFoundError,
    PermissionDeniedError,
    ServiceUnavailableError,
)
from labspawner.events import EventStreamParser, LabEvent
from labspawner.models import (
    App,
    Cluster,
    FileServer,
    FileServerMount,
    FileServerStatus,
    Kernel,
    LabStatus,
)

__all__ = [
    "App",
    "AppFailedError",
    "Cluster",
    "ClusterFailedError",
    "ConflictError",
    "EventStreamParser",
    "FileServer",
    "FileServerMount",
    "FileServerStatus",
    "InvalidRequestError",
    "Kernel",
    "KernelFailedError",
    "LabEvent",
    "LabFailedError",
    "LabSpawnerClient",
    "LabSpawnerError",
    "LabStatus",
    "NotAuthenticatedError",
    "NotFoundError",
    "PermissionDeniedError",
    "ServiceUnavailableError",
]
