"""The configuration sections the kinds own: the one list the configuration's root schema
(``app.config.schema``) is composed from.

A kind with a section of its own declares it as ``SECTIONS`` in its package's ``config.py``
and is named here; a kind without one (kernels, sized and placed by the lab's sizes and the
clusters' tiers) is not. This list stays apart from ``app.workloads.kinds``, which imports
the kinds' steps and through them the network libraries: gunicorn's arbiter validates the
configuration before forking, and must not import those before the workers patch them.
"""

from __future__ import annotations

from app.config_fields import ConfigSections, SectionCheck
from app.workloads.app.config import SECTIONS as APP_SECTIONS
from app.workloads.cluster.config import SECTIONS as CLUSTER_SECTIONS
from app.workloads.fileserver.config import CHECKS as FILESERVER_CHECKS
from app.workloads.fileserver.config import SECTIONS as FILESERVER_SECTIONS
from app.workloads.image.config import SECTIONS as IMAGE_SECTIONS
from app.workloads.lab.config import SECTIONS as LAB_SECTIONS

KIND_SECTIONS: tuple[ConfigSections, ...] = (
    LAB_SECTIONS,
    CLUSTER_SECTIONS,
    APP_SECTIONS,
    IMAGE_SECTIONS,
    FILESERVER_SECTIONS,
)

KIND_CHECKS: tuple[SectionCheck, ...] = FILESERVER_CHECKS
"""The rules between a kind's section and the others', run on the whole loaded
configuration (``CHECKS`` in a kind's ``config.py``)."""
