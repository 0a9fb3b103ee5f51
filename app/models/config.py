"""The validated configuration, as typed objects the rest of the service reads.

No field has a default here: the schemas (``app.config.schema`` and the kinds' ``config.py``)
are the one place that says what an unset key means, and they build these objects."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

S = TypeVar("S")


@dataclass(frozen=True)
class GafaelfawrConfig:
    """Where to verify tokens and how long to trust an answer."""

    url: str
    timeout: float
    cache_seconds: int


@dataclass(frozen=True)
class RedisSentinelConfig:
    """Where Redis Sentinel runs and which of its monitored services is ours.

    The service asks the sentinels for the current primary on every new connection, so a
    failover needs no restart. Passwords never live here: they come from the environment
    (``SPAWNER_REDIS_SENTINEL_PASSWORD`` for the sentinels, ``SPAWNER_REDIS_PASSWORD`` for
    the Redis servers) and are kept out of ``repr`` so no log line can show them.
    """

    addresses: tuple[tuple[str, int], ...]
    service_name: str
    db: int
    username: str | None
    """The ACL user on the Redis servers, if they use ACLs."""
    sentinel_username: str | None
    """The ACL user on the sentinels, if they use ACLs."""
    sentinel_password: str | None = field(repr=False)


@dataclass(frozen=True)
class RedisConfig:
    """The shared Redis: one server at ``url``, or whichever primary ``sentinel`` names.

    Exactly one of ``url`` and ``sentinel`` is set. ``SPAWNER_REDIS_URL`` replaces either;
    ``password`` comes from ``SPAWNER_REDIS_PASSWORD`` only.
    """

    url: str | None
    sentinel: RedisSentinelConfig | None
    key_prefix: str
    socket_timeout: float
    socket_connect_timeout: float
    max_connections: int
    password: str | None = field(repr=False)


@dataclass(frozen=True)
class KubernetesConfig:
    """How to reach the Kubernetes API and how long any one call may take."""

    mode: str
    host: str | None
    kubeconfig: str | None
    request_timeout: float
    service_namespace: str
    certificate_authority: str | None = None
    """With ``host``: the CA file the API server's certificate is checked against (in a
    cluster and with a kubeconfig, theirs is used)."""


@dataclass(frozen=True)
class LabSize:
    """A lab size: limits a lab may burst to and requests the scheduler reserves.

    ``groups``, when not empty, restricts the size to members of any of those groups.
    """

    name: str
    cpu: float
    memory: int
    cpu_request: float
    memory_request: int
    groups: tuple[str, ...]


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
    env: dict[str, str] = field(default_factory=dict)
    """Configured variables; with whom it provisions, its whole environment."""


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
    internal_url: str
    """Template of the URL JupyterHub reaches a lab at; see ``app.url_template``."""
    spawn_timeout: float
    delete_timeout: float
    network_policy: NetworkPolicyConfig

    def size(self, name: str) -> LabSize | None:
        """The size called ``name``; matched regardless of case when no name is exactly it,
        as nublado's form submits sizes title-cased."""
        exact = next((s for s in self.sizes if s.name == name), None)
        if exact is not None:
            return exact
        folded = name.casefold()
        return next((s for s in self.sizes if s.name.casefold() == folded), None)


class SourceType(StrEnum):
    """Where a prepull configuration's images come from (DMTN-222 ``type``)."""

    RUBIN = "rubin"
    """A Docker Registry v2 repository whose tags follow SQR-059."""
    RUBIN_GAR = "rubin-gar"
    """The same, in Google Artifact Registry (``<location>-docker.pkg.dev``)."""
    SIMPLE = "simple"
    """A fixed list of images, each always prepulled."""


@dataclass(frozen=True)
class SimpleImage:
    """One image of a ``simple`` configuration; ``digest`` pins it without a registry call."""

    url: str
    name: str
    digest: str | None


@dataclass(frozen=True)
class ImageValidation:
    """How a source's new images are tried before anyone gets them: ``command`` runs in a
    pod of the image under test (of ``size``, a lab size or a hardware tier) on ``nodes``
    nodes at once, and must exit 0 within ``timeout`` seconds on every one of them."""

    command: tuple[str, ...]
    timeout: float
    size: str
    nodes: int


@dataclass(frozen=True)
class PrepullConfig:
    """One DMTN-222 prepull configuration block: a source of lab images and which of its
    images to prepull (and so to list first in the spawn form).

    For the registry types, ``registry`` is the registry's host and ``repository`` the
    repository path inside it (for ``rubin-gar``, ``<projectId>/<repository>/<image>``).
    ``groups``, when not empty, offers this configuration's images only to members of any
    of those groups. ``document`` is the block as configured (camelCase), which the prepull
    status route returns.
    """

    name: str
    type: SourceType
    registry: str | None
    repository: str | None
    recommended_tag: str | None
    num_releases: int
    num_weeklies: int
    num_dailies: int
    cycle: int | None
    alias_tags: tuple[str, ...]
    images: tuple[SimpleImage, ...]
    groups: tuple[str, ...]
    document: dict[str, Any] = field(compare=False, hash=False)
    validation: ImageValidation | None
    """None: the source is trusted, its images validated as soon as they are listed."""
    retention: int
    """Validated builds of each class (release, weekly, daily) kept in service; older ones
    are retired."""

    @property
    def source(self) -> str | None:
        """``<registry>/<repository>``, the image name tags are appended to."""
        if self.registry is None or self.repository is None:
            return None
        return f"{self.registry}/{self.repository}"


@dataclass(frozen=True)
class ImagesConfig:
    """How the image lists are kept fresh and how registries are reached.

    ``credentials_secret`` names a ``kubernetes.io/dockerconfigjson`` Secret in the
    service's namespace holding per-registry credentials; ``insecure_registries`` are hosts
    spoken to over plain HTTP (as Docker's daemon setting of that name).
    """

    refresh_seconds: float
    lease_seconds: float
    request_timeout: float
    credentials_secret: str | None
    insecure_registries: tuple[str, ...]


@dataclass(frozen=True)
class PrepullerConfig:
    """The elected prepuller: how often it looks, and how many pulls it runs at once.

    Pulls run in short-lived pods in the service's namespace, each pinned to a node and
    pulling a batch of images one after another; at most ``pulls_per_node`` run on one node
    and ``max_pulls`` in the whole cluster. ``pull_timeout`` is per image. A pull that fails
    is retried after ``retry_seconds``, doubling per failure up to ``max_retry_seconds``.
    """

    enabled: bool
    interval_seconds: float
    lease_seconds: float
    pulls_per_node: int
    max_pulls: int
    pull_timeout: float
    retry_seconds: float
    max_retry_seconds: float


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

    lease_seconds: float
    watch_seconds: int
    reconcile_seconds: float


@dataclass(frozen=True)
class LimitsConfig:
    """What one caller may send and hold: a request body's size, open event streams per
    user and per worker, spawns and deletes per user per minute (the mutating routes), and
    creations per admission group per minute (0: no limit)."""

    max_body_bytes: int
    streams_per_user: int
    mutations_per_minute: int
    streams_per_worker: int
    group_mutations_per_minute: int


@dataclass(frozen=True)
class AdmissionConfig:
    """Fair admission of creations (spawns, and cluster, kernel and app creations): at most
    ``max_in_progress`` at once across every replica (0: no limit, none waits), the rest
    waiting in a queue of at most ``max_waiting``, fair between groups. A user's group is
    the first of ``groups`` they belong to, else their primary group (the one whose GID is
    their GID), else themselves alone."""

    max_in_progress: int
    max_waiting: int
    groups: tuple[str, ...]


DEFAULT_ADMIN_POD_SCOPE = "admin:lab-pods"
"""The scope that lets an administrator start the maintenance pod, unless configured
otherwise (``admin.pod.scope``): named here because the routes' documentation shows it."""


@dataclass(frozen=True)
class AdminPodConfig:
    """The privileged maintenance pod an administrator may start (at most one): a root shell
    with every configured volume (or those named in ``volumes``) mounted whole under
    ``mount_prefix``, for repairs no lab may make. No ``image``: the routes refuse to start
    one. Only holders of ``scope`` may start, read or delete it."""

    image: str | None
    scope: str
    namespace: str
    name: str
    mount_prefix: str
    volumes: tuple[str, ...]
    """Names of ``lab.volumes`` to mount; empty: all of them."""
    command: tuple[str, ...]
    args: tuple[str, ...]
    cpu: float
    memory: int
    node_selector: dict[str, str]
    tolerations: tuple[Toleration, ...]


@dataclass(frozen=True)
class AdminConfig:
    """The administrators' tools: ``audit_length`` entries of the audit log are kept; labs
    whose spawn failed are deleted ``drop_failed_labs_after_seconds`` after they failed (0:
    only when an administrator asks); the privileged maintenance pod is ``pod``."""

    audit_length: int
    drop_failed_labs_after_seconds: float
    pod: AdminPodConfig


@dataclass(frozen=True)
class HardwareTier:
    """Resources and placement one pod of a compute cluster can be given, by name.

    ``cores`` is what the scheduler reserves and ``cores_limit`` what the pod may burst to;
    memory is both. ``node_pool``, when set, is the value of ``ClustersConfig.node_pool_label``
    the pod must run on. ``kinds``, when not empty, restricts the tier to those kinds of
    cluster (the seed's ``computeClusterRestrictions``).
    """

    name: str
    id: str
    cores: float
    cores_limit: float
    memory: int
    gpus: int
    node_pool: str | None
    kinds: tuple[str, ...]


@dataclass(frozen=True)
class ClustersConfig:
    """Users' compute clusters: the kinds offered, the hardware tiers, the defaults."""

    kinds: tuple[str, ...]
    tiers: tuple[HardwareTier, ...]
    default_worker_tier: str
    default_head_tier: str
    node_pool_label: str
    max_workers: int
    """The most workers any one cluster may have, whatever a budget allows."""
    reach_by: str
    """How clusters' addresses name their head Service: ``dns`` (its DNS name, as pods in a
    Kubernetes cluster reach it) or ``clusterIP`` (its cluster IP, for a cluster without DNS
    such as the local stack's)."""

    def tier(self, name: str) -> HardwareTier | None:
        return next((t for t in self.tiers if t.name == name), None)


@dataclass(frozen=True)
class Budget:
    """What one user may hold at once across their compute clusters and remote kernels."""

    clusters: int
    workers: int
    kernels: int
    cpu: float
    memory: int
    gpus: int


@dataclass(frozen=True)
class GroupBudget:
    group: str
    budget: Budget


@dataclass(frozen=True)
class BudgetsConfig:
    """Per-group budgets; a user gets, limit by limit, the largest of their groups', or
    ``default`` when no group of theirs has one."""

    default: Budget
    groups: tuple[GroupBudget, ...]


@dataclass(frozen=True)
class AppVariable:
    """A variable an app template asks for: shown when an app is made, with its default."""

    name: str
    description: str
    default: str | None
    optional: bool


@dataclass(frozen=True)
class AppServicePort:
    """A port of an app's Service, forwarding to ``target_port`` of its pod."""

    name: str
    port: int
    target_port: int | str


@dataclass(frozen=True)
class AppTemplate:
    """How an app of one kind (MLflow, a dashboard, a small database) is made: its pod (only
    the first container is used), its Service's ports, the port that serves its web pages
    and the variables a group fills in."""

    name: str
    version: str
    description: str
    doc_link: str | None
    pod_spec: dict[str, Any]
    service_ports: tuple[AppServicePort, ...]
    http_port: int
    variables: tuple[AppVariable, ...]

    def variable(self, name: str) -> AppVariable | None:
        return next((v for v in self.variables if v.name == name), None)


@dataclass(frozen=True)
class GroupVolume:
    """Each group's storage, where its apps keep their data: ``{group}`` in ``path`` or
    ``claim_name`` is replaced by the group's name. Without one, apps get an emptyDir."""

    type: str
    server: str | None
    path: str | None
    claim_name: str | None
    mount_path: str


@dataclass(frozen=True)
class AppQuota:
    """What one group's apps may request in all."""

    cpu: float
    memory: int
    gpus: int


@dataclass(frozen=True)
class GroupAppQuota:
    group: str
    quota: AppQuota


@dataclass(frozen=True)
class AppsConfig:
    """Groups' apps: the templates offered, where apps are served and who may reach them,
    their storage and each group's quota."""

    templates: tuple[AppTemplate, ...]
    base_url: str
    """The platform's URL: apps are served under it, at ``path_prefix/<id>/``."""
    path_prefix: str
    platform_scopes: tuple[str, ...]
    """A token with any of these reaches an app of scope ``platform``."""
    group_scope: str
    """The scope, ``{group}`` replaced, that Gafaelfawr grants a group's members (its
    ``groupMapping``): it lets them reach an app of scope ``group``."""
    ingress_namespaces: tuple[str, ...]
    """Namespaces whose pods (the ingress controller's) may open connections to apps."""
    group_volume: GroupVolume | None
    default_quota: AppQuota
    group_quotas: tuple[GroupAppQuota, ...]

    def template(self, name: str) -> AppTemplate | None:
        return next((t for t in self.templates if t.name == name), None)

    def quota_for(self, group: str) -> AppQuota:
        return next((q.quota for q in self.group_quotas if q.group == group), self.default_quota)


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
    prepull: tuple[PrepullConfig, ...]
    images: ImagesConfig
    prepuller: PrepullerConfig
    watcher: WatcherConfig
    limits: LimitsConfig
    admission: AdmissionConfig
    clusters: ClustersConfig
    budgets: BudgetsConfig
    apps: AppsConfig
    admin: AdminConfig
    log_format: str
    """``json``: one JSON object per line (production); ``text``: plain lines (local stack)."""
    sections: dict[str, Any]
    """The sections of kinds that keep their configuration's model in their own package
    (``fileserver``), by key: a kind read its own with ``section``."""

    def section(self, key: str, model: type[S]) -> S:
        """The section ``key`` of a kind that keeps its model in its package, as that model."""
        value = self.sections[key]
        if not isinstance(value, model):
            raise TypeError(f"configuration section {key} is not a {model.__name__}")
        return value

    def setting(self, path: str) -> Any:
        """The value at a dotted path of keys' attributes (``admin.pod.scope``), the first
        of which may name a kind's section."""
        head, *rest = path.split(".")
        value = getattr(self, head) if head in self.__dataclass_fields__ else self.sections[head]
        for part in rest:
            value = getattr(value, part)
        return value
