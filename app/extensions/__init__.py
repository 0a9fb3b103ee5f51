"""Flask extensions: process-wide clients created once by the app factory."""

from app.extensions.api import ApiExtension
from app.extensions.gafaelfawr import GafaelfawrExtension
from app.extensions.kubernetes import KubernetesExtension
from app.extensions.labs import LabsExtension
from app.extensions.limits import LimitsExtension
from app.extensions.redis import RedisExtension

api_ext = ApiExtension()
redis_ext = RedisExtension()
kubernetes_ext = KubernetesExtension()
gafaelfawr_ext = GafaelfawrExtension()
labs_ext = LabsExtension()
limits_ext = LimitsExtension()

__all__ = [
    "ApiExtension",
    "GafaelfawrExtension",
    "KubernetesExtension",
    "LabsExtension",
    "LimitsExtension",
    "RedisExtension",
    "api_ext",
    "gafaelfawr_ext",
    "kubernetes_ext",
    "labs_ext",
    "limits_ext",
    "redis_ext",
]
