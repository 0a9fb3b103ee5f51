"""The validated configuration, as typed objects the rest of the service reads."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GafaelfawrConfig:
    """Where to verify tokens and how long to trust an answer."""

    url: str
    timeout: float
    cache_seconds: int


@dataclass(frozen=True)
class RedisConfig:
    """The shared Redis; ``url`` is overridden by ``SPAWNER_REDIS_URL``."""

    url: str
    key_prefix: str
    socket_timeout: float
    socket_connect_timeout: float
    max_connections: int


@dataclass(frozen=True)
class KubernetesConfig:
    """How to reach the Kubernetes API and how long any one call may take."""

    mode: str
    host: str | None
    kubeconfig: str | None
    request_timeout: float
    service_namespace: str


@dataclass(frozen=True)
class LabImage:
    """An image users may choose (until registry sources supply the list)."""

    reference: str
    name: str
    digest: str | None


@dataclass(frozen=True)
class LabSize:
    """A lab size: limits a lab may burst to and requests the scheduler reserves."""

    name: str
    cpu: float
    memory: int
    cpu_request: float
    memory_request: int


@dataclass(frozen=True)
class CopiedSecret:
    """A key of a Secret in the service's namespace copied into each lab's Secret."""

    secret_name: str
    secret_key: str
    env: str | None


@dataclass(frozen=True)
class LabVolume:
    """A volume available to lab containers; ``type`` picks which source fields apply."""

    name: str
    type: str
    path: str | None
    server: str | None
    claim_name: str | None
    read_only: bool


@dataclass(frozen=True)
class LabVolumeMount:
    """Where a configured volume appears inside a container."""

    volume_name: str
    mount_path: str
    sub_path: str | None
    read_only: bool


@dataclass(frozen=True)
class InitContainer:
    """A provisioning container run before the lab on a user's first spawn only.

    It must be idempotent: the provisioned flag can be lost with Redis's data.
    """

    name: str
    image: str
    privileged: bool
    command: tuple[str, ...]
    args: tuple[str, ...]
    volume_mounts: tuple[LabVolumeMount, ...]


@dataclass(frozen=True)
class Toleration:
    key: str | None
    operator: str
    value: str | None
    effect: str | None
    toleration_seconds: int | None


@dataclass(frozen=True)
class NetworkPolicyConfig:
    """Who may open connections to a lab: its own namespace plus these namespaces."""

    enabled: bool
    ingress_namespaces: tuple[str, ...]


@dataclass(frozen=True)
class LabConfig:
    """Everything that shapes a user's lab besides the user and their options."""

    images: tuple[LabImage, ...]
    sizes: tuple[LabSize, ...]
    env: dict[str, str]
    secrets: tuple[CopiedSecret, ...]
    pull_secret: str | None
    secrets_path: str
    volumes: tuple[LabVolume, ...]
    volume_mounts: tuple[LabVolumeMount, ...]
    init_containers: tuple[InitContainer, ...]
    node_selector: dict[str, str]
    tolerations: tuple[Toleration, ...]
    command: tuple[str, ...]
    args: tuple[str, ...]
    port: int
    spawn_timeout: float
    delete_timeout: float
    network_policy: NetworkPolicyConfig

    def image(self, reference: str) -> LabImage | None:
        return next((i for i in self.images if i.reference == reference), None)

    def size(self, name: str) -> LabSize | None:
        return next((s for s in self.sizes if s.name == name), None)


@dataclass(frozen=True)
class OperationsConfig:
    """How operations are shared between workers and how event streams behave."""

    lease_seconds: float
    scan_seconds: float
    keepalive_seconds: float
    max_concurrent: int


@dataclass(frozen=True)
class WatcherConfig:
    """The elected watcher that keeps Redis in step with Kubernetes.

    ``lease_seconds`` bounds how long labs go unwatched after the leader dies;
    ``watch_seconds`` is how long one watch request lasts before it is reopened;
    ``reconcile_seconds`` is how often Redis is compared with Kubernetes in full.
    """

    lease_seconds: float = 15.0
    watch_seconds: int = 60
    reconcile_seconds: float = 60.0


@dataclass(frozen=True)
class Config:
    """The whole service configuration."""

    log_level: str
    namespace_prefix: str
    gafaelfawr: GafaelfawrConfig
    redis: RedisConfig
    kubernetes: KubernetesConfig
    lab: LabConfig
    operations: OperationsConfig
    watcher: WatcherConfig = field(default_factory=WatcherConfig)
