"""Flask extensions: process-wide clients created once by the app factory."""

from app.extensions.gafaelfawr import GafaelfawrExtension
from app.extensions.kubernetes import KubernetesExtension
from app.extensions.redis import RedisExtension

redis_ext = RedisExtension()
kubernetes_ext = KubernetesExtension()
gafaelfawr_ext = GafaelfawrExtension()

__all__ = [
    "GafaelfawrExtension",
    "KubernetesExtension",
    "RedisExtension",
    "gafaelfawr_ext",
    "kubernetes_ext",
    "redis_ext",
]
