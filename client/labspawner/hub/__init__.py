"""The JupyterHub side: ``LabSpawner`` (entry point ``lab-spawner`` in ``jupyterhub.spawners``)
and ``GafaelfawrTokenAuthenticator`` (``gafaelfawr-token`` in ``jupyterhub.authenticators``).

Importing this package needs JupyterHub (``pip install 'lab-spawner-client[jupyterhub]'``);
the client in :mod:`labspawner` does not.
"""

from labspawner.hub.auth import GafaelfawrTokenAuthenticator
from labspawner.hub.spawner import LabSpawner, options_from_form

__all__ = ["GafaelfawrTokenAuthenticator", "LabSpawner", "options_from_form"]
