"""Flask extensions: process-wide clients created once by the app factory."""

from app.extensions.gafaelfawr import GafaelfawrExtension
from app.extensions.kubernetes import KubernetesExtension
from app.extensions.labs import LabsExtension
from app.extensions.redis import RedisExtension

redis_ext = RedisExtension()
kubernetes_ext = KubernetesExtension()
gafaelfawr_ext = GafaelfawrExtension()
labs_ext = LabsExtension()

__all__ = [
    "GafaelfawrExtension",
    "KubernetesExtension",
    "LabsExtension",
    "RedisExtension",
    "gafaelfawr_ext",
    "kubernetes_ext",
    "labs_ext",
    "redis_ext",
]
