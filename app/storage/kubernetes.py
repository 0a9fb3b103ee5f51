"""The Kubernetes calls the service makes for labs, as plain JSON dicts.

Requests go through the ``kubernetes`` client's ``ApiClient`` (its configuration, auth,
headers, TLS, connection pool and retries) but not through its generated per-endpoint
methods: those validate a plain-dict body into the client's pydantic models and dump it
back before sending, about 350 microseconds of CPU for a lab's pod, measured, and the
strict models reject objects a real API server may legitimately return. Responses are
read as raw JSON for the same reasons. Every call carries the client's deadline (see
``DeadlineApiClient``). Watches are read line by line here, because the client's own watch
helper mishandles error events when asked not to deserialize.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from urllib3.exceptions import HTTPError

from app import metrics
from app.builders.names import MANAGED_BY, MANAGED_BY_LABEL, OURS_SELECTOR
from app.concurrency import start_task
from app.runtime.collector import collector_paused

if TYPE_CHECKING:
    from kubernetes import client as k8s
    from kubernetes.client.exceptions import ApiException

    from app.models.config import KubernetesConfig
    from app.storage.kubernetes_client import ApiClients

logger = logging.getLogger(__name__)

WATCH_SLACK_SECONDS = 5
"""Read deadline beyond a watch's own ``timeoutSeconds``."""

TRANSIENT_STATUSES = frozenset({0, 429, 500, 502, 503, 504})
"""Answers worth trying again: unreachable or timed out (0), throttled, server trouble."""

RETRY_ATTEMPTS = 4
RETRY_BASE_SECONDS = 0.2
MAX_RETRY_AFTER_SECONDS = 5.0
"""The longest a throttled call waits on the API server's ``Retry-After`` before retrying."""
REPLACE_ATTEMPTS = 3
"""Reads and replaces of one object before a conflict is the caller's (``_replace``)."""
NAMESPACE_TERMINATING = "NamespaceTerminating"
"""The cause the API server gives a create refused in a namespace being deleted."""


class KubernetesError(Exception):
    """A Kubernetes call failed; ``status`` is the HTTP code (0 when unreachable)."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        retry_after: float | None = None,
        causes: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        """Seconds the API server asked the client to wait (a 429's ``Retry-After``)."""
        self.causes = causes
        """The reasons of the Status's ``details.causes`` (``NAMESPACE_TERMINATING``)."""


def is_transient(exc: KubernetesError) -> bool:
    """A failure worth trying again: unreachable, timed out, throttled or server trouble."""
    return exc.status in TRANSIENT_STATUSES


@dataclass(frozen=True)
class CustomKind:
    """A custom resource, by where the API serves it."""

    group: str
    version: str
    plural: str

    def path(self, namespace: str, name: str | None = None) -> str:
        path = f"/apis/{self.group}/{self.version}/namespaces/{namespace}/{self.plural}"
        return path if name is None else f"{path}/{name}"


class WatchExpired(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""


def _error(exc: ApiException) -> KubernetesError:
    message = exc.reason or "error"
    reason = ""
    causes: tuple[str, ...] = ()
    try:
        body = json.loads(exc.body) if exc.body else {}
        message = body.get("message", message)
        reason = body.get("reason", "")
        details = body.get("details") or {}
        causes = tuple(str(c.get("reason", "")) for c in details.get("causes") or [])
    except (TypeError, ValueError, AttributeError):
        pass
    return KubernetesError(exc.status or 0, reason, message, _retry_after(exc), causes)


def _retry_after(exc: ApiException) -> float | None:
    value = (exc.headers or {}).get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date: the backoff stands


CORE = "/api/v1"
NETWORKING = "/apis/networking.k8s.io/v1"
APPS = "/apis/apps/v1"
BATCH = "/apis/batch/v1"
_GROUPS = {
    "configmaps": CORE,
    "events": CORE,
    "pods": CORE,
    "resourcequotas": CORE,
    "secrets": CORE,
    "services": CORE,
    "networkpolicies": NETWORKING,
    "ingresses": NETWORKING,
    "deployments": APPS,
    "jobs": BATCH,
}
_QUERY_NAMES = {
    "label_selector": "labelSelector",
    "field_selector": "fieldSelector",
    "limit": "limit",
}


def resource_path(resource: str, namespace: str | None = None, name: str | None = None) -> str:
    """The API path of a collection (``name`` None) or of one object.

    Namespaces and nodes are cluster-wide; without ``namespace`` a namespaced resource's
    path is its list across all namespaces.
    """
    if resource in ("namespaces", "nodes"):
        path = f"{CORE}/{resource}"
    elif namespace is None:
        path = f"{_GROUPS[resource]}/{resource}"
    else:
        path = f"{_GROUPS[resource]}/namespaces/{namespace}/{resource}"
    return path if name is None else f"{path}/{name}"


def send(
    api: k8s.ApiClient,
    method: str,
    path: str,
    *,
    query: list[tuple[str, Any]] | None = None,
    body: dict[str, Any] | list[Any] | None = None,
    timeout: float | None = None,
    content_type: str = "application/json",
) -> Any:
    """One request through ``api``; the unread urllib3 response of a 2xx answer.

    ``ApiClient.param_serialize`` adds what the generated methods would (the default
    headers, the bearer token, the host) and ``call_api`` sends it with the client's REST
    layer. The body, plain JSON already, skips the client's sanitizing walk. Any other
    status, and an API server out of reach, is a ``KubernetesError``.
    """
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = content_type
    verb, resource = metrics.kubernetes_verb(method, path, query), metrics.kubernetes_resource(path)
    method, url, headers, _, post_params = api.param_serialize(
        method, path, query_params=query, header_params=headers, auth_settings=["BearerToken"]
    )
    # Imported with the client that ``api`` is: a module-table lookup here.
    from kubernetes.client.exceptions import ApiException

    began = time.monotonic()
    try:
        response = api.call_api(method, url, headers, body, post_params, _request_timeout=timeout)
    except BaseException as exc:
        metrics.observe_kubernetes(verb, resource, 0, time.monotonic() - began)
        if isinstance(exc, ApiException):
            raise _error(exc) from None
        if isinstance(exc, (HTTPError, OSError)):
            raise _unreachable(exc) from None
        raise
    metrics.observe_kubernetes(verb, resource, response.status, time.monotonic() - began)
    if not 200 <= response.status <= 299:
        response.read()
        raise _error(ApiException(http_resp=response))
    return response.response


def _unreachable(exc: BaseException) -> KubernetesError:
    return KubernetesError(0, "Unreachable", f"Kubernetes API unreachable: {exc}")


def _call_once(api: k8s.ApiClient, method: str, path: str, **kwargs: Any) -> Any:
    return parse_body(send(api, method, path, **kwargs).data)


LARGE_BODY_BYTES = 1 << 20
"""Bodies from this size up (a list of hundreds of pods) are parsed with the cyclic garbage
collector paused (``parse_body``)."""


def parse_body(data: bytes) -> Any:
    """A response body's JSON.

    Parsing a list of 10,000 pods (70 MB) creates millions of dicts and lists, and each
    batch of new containers sets off a collection whose oldest generation walks everything
    alive, so the parse grew faster than the list: 1.3 s for 10,000 pods against 0.04 s for
    1,000, while it took 0.36 s with the collector paused (the ``scale`` benchmark; see
    ``app.runtime.collector``). Parsed JSON holds no reference cycles, so pausing the
    collector for the parse frees nothing later than it would be; it runs again as soon as
    the parse ends. A collector already paused is left paused.
    """
    if len(data) < LARGE_BODY_BYTES:
        return json.loads(data)
    with collector_paused():
        return json.loads(data)


def _call(api: k8s.ApiClient, method: str, path: str, **kwargs: Any) -> Any:
    """Make the call, retrying what a busy or restarting API server answers.

    Every caller is idempotent about a retried write: a create that did happen before its
    answer was lost comes back as 409 (or, for a pod in a namespace whose quota it fills, as
    403 over quota) and is adopted, a repeated delete as 404. So a timeout
    or a 5xx costs a short, jittered backoff instead of a failed spawn.
    """
    for attempt in range(RETRY_ATTEMPTS):
        try:
            return _call_once(api, method, path, **kwargs)
        except KubernetesError as exc:
            if not is_transient(exc) or attempt == RETRY_ATTEMPTS - 1:
                raise
            delay = RETRY_BASE_SECONDS * (2**attempt) * (0.5 + random.random())  # noqa: S311
            if exc.retry_after is not None:
                delay = max(delay, min(exc.retry_after, MAX_RETRY_AFTER_SECONDS))
            logger.info("Kubernetes %s (%s); retrying in %.2fs", exc.status, exc.reason, delay)
            time.sleep(delay)
    raise AssertionError("unreachable")


LOG_LIMIT_BYTES = 1024 * 1024
"""The most of a pod's log one read returns."""

REPLACED_UNREAD = frozenset({"secrets"})
"""Kinds ``apply`` replaces without reading the existing object (an update without a
``resourceVersion`` is unconditional for Secrets). The service writes Secrets into lab
namespaces but never reads them there, so its ClusterRole needs no cluster-wide ``get`` on
Secrets, which would let it read every Secret in the cluster; it reads Secrets only in its own
namespace, through a Role. Safe because the lab namespace is checked to be ours before anything
is written into it."""


def is_ours(obj: dict[str, Any]) -> bool:
    labels = obj.get("metadata", {}).get("labels") or {}
    return bool(labels.get(MANAGED_BY_LABEL) == MANAGED_BY)


class KubernetesConnection:
    """A process's Kubernetes clients, built at the first call that needs one.

    Building them imports the ``kubernetes`` library (``app.storage.kubernetes_client``).
    A web worker answers from Redis: only an administrator's rare request (an app's log, a
    forced delete, the admin pod) calls the API server from it, so most never load the
    library. A runner builds them as it starts (``open``), so its first operation does not
    wait for the import.
    """

    def __init__(self, build: Callable[[], ApiClients]) -> None:
        self._build = build
        self._clients: ApiClients | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config: KubernetesConfig) -> KubernetesConnection:
        """The clients ``config`` describes, built at the first call."""

        def build() -> ApiClients:
            from app.storage.kubernetes_client import connect

            return connect(config)

        return cls(build)

    @classmethod
    def of(cls, requests: k8s.ApiClient, watches: k8s.ApiClient) -> KubernetesConnection:
        """Clients already built (a test's, a tool's)."""

        def build() -> ApiClients:
            from app.storage.kubernetes_client import ApiClients

            return ApiClients(requests=requests, watches=watches)

        return cls(build)

    @property
    def opened(self) -> bool:
        """Whether the clients exist (and the library is loaded) in this process."""
        return self._clients is not None

    def clients(self) -> ApiClients:
        clients = self._clients
        if clients is not None:
            return clients
        with self._lock:
            if self._clients is None:
                self._clients = self._build()
            return self._clients

    def open(self) -> None:
        """Build the clients now rather than at the first call."""
        self.clients()


class KubernetesStorage:
    """Create, read, watch and delete the objects of labs."""

    def __init__(
        self,
        api_client: k8s.ApiClient | None = None,
        watches: k8s.ApiClient | None = None,
        *,
        connection: KubernetesConnection | None = None,
    ) -> None:
        """The calls go through ``connection``, or through ``api_client`` and ``watches``
        (the client watches are made with, if given: its own connection pool, so a watch
        being read to its end never holds a connection requests need)."""
        if connection is None:
            if api_client is None:
                raise TypeError("KubernetesStorage needs a client or a connection")
            connection = KubernetesConnection.of(api_client, watches or api_client)
        self.connection = connection

    @property
    def _api(self) -> k8s.ApiClient:
        return self.connection.clients().requests

    @property
    def _watch_api(self) -> k8s.ApiClient:
        return self.connection.clients().watches

    def _get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The object, or None if it does not exist."""
        try:
            result: dict[str, Any] = _call(
                self._api, "GET", resource_path(resource, namespace, name)
            )
        except KubernetesError as exc:
            if exc.status == 404:
                return None
            raise
        return result

    def _create(self, resource: str, body: dict[str, Any]) -> dict[str, Any]:
        namespace = None if resource == "namespaces" else body["metadata"]["namespace"]
        result: dict[str, Any] = _call(
            self._api, "POST", resource_path(resource, namespace), body=body
        )
        return result

    def _delete(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        grace_seconds: int | None = None,
        propagation: str | None = None,
    ) -> dict[str, Any] | None:
        """Ask for the object's deletion; the API server's answer (the object, or a Status),
        or None if it was already gone."""
        query = [] if grace_seconds is None else [("gracePeriodSeconds", str(grace_seconds))]
        if propagation is not None:
            query.append(("propagationPolicy", propagation))
        try:
            answer: dict[str, Any] = _call(
                self._api, "DELETE", resource_path(resource, namespace, name), query=query
            )
        except KubernetesError as exc:
            if exc.status == 404:
                return None
            raise
        return answer

    def _list(
        self, resource: str, namespace: str | None = None, **selectors: str
    ) -> dict[str, Any]:
        query = [(_QUERY_NAMES[key], value) for key, value in selectors.items()]
        result: dict[str, Any] = _call(
            self._api, "GET", resource_path(resource, namespace), query=query
        )
        return result

    # Namespaces ----------------------------------------------------------------------

    def read_namespace(self, name: str) -> dict[str, Any] | None:
        return self._get("namespaces", None, name)

    def create_namespace(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._create("namespaces", body)

    def delete_namespace(self, name: str) -> dict[str, Any] | None:
        """Ask for the namespace's deletion; the namespace as the API server answered (it
        stays, terminating, until its contents are gone), or None if it was already gone."""
        answer = self._delete("namespaces", None, name)
        return answer if answer is not None and answer.get("kind") == "Namespace" else None

    def list_lab_namespaces(self) -> list[dict[str, Any]]:
        return list(self._list("namespaces", label_selector=OURS_SELECTOR).get("items") or [])

    # Namespaced objects other than pods ----------------------------------------------

    def apply(self, resource: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create the object, or replace it if an object of ours already has its name.

        Idempotent, so a resumed operation can repeat the step; an object with the same
        name that we do not manage is left alone and reported.
        """
        namespace = body["metadata"]["namespace"]
        name = body["metadata"]["name"]
        try:
            return self._create(resource, body)
        except KubernetesError as exc:
            if exc.status != 409:
                raise
        path = resource_path(resource, namespace, name)
        if resource in REPLACED_UNREAD:
            unconditional = json.loads(json.dumps(body))
            unconditional["metadata"].pop("resourceVersion", None)
            result: dict[str, Any] = _call(self._api, "PUT", path, body=unconditional)
            return result

        def desired(existing: dict[str, Any]) -> dict[str, Any]:
            wanted = json.loads(json.dumps(body))
            if resource == "services":
                wanted["spec"]["clusterIP"] = existing.get("spec", {}).get("clusterIP")
            return wanted

        return self._replace(path, f"{resource} {namespace}/{name}", desired)

    def delete_object(
        self, resource: str, namespace: str, name: str, *, propagation: str | None = None
    ) -> bool:
        """Ask for the deletion of an object of ours; False if it was already gone.
        ``propagation`` is the API's ``propagationPolicy``: a Job's pods are orphaned unless
        it is ``Background`` or ``Foreground`` (batch/v1 keeps its old default)."""
        return self._delete(resource, namespace, name, propagation=propagation) is not None

    def set_quota(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """Set an existing ResourceQuota's ``spec.hard`` in one merge patch (no read; the
        quota of a lab namespace is the service's own), or create it if it is missing; None
        when its namespace is gone or being deleted, which admits nothing new to hold."""
        meta = body["metadata"]
        path = resource_path("resourcequotas", meta["namespace"], meta["name"])
        patch = {"spec": {"hard": body["spec"]["hard"]}}
        try:
            result: dict[str, Any] = _call(
                self._api, "PATCH", path, body=patch, content_type="application/merge-patch+json"
            )
        except KubernetesError as exc:
            if exc.status != 404:
                raise
            try:
                result = self._create("resourcequotas", body)
            except KubernetesError as refused:
                if refused.status == 404 or NAMESPACE_TERMINATING in refused.causes:
                    return None
                raise
        return result

    def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get("secrets", namespace, name)

    def delete_secret(self, namespace: str, name: str) -> bool:
        """Delete the Secret; False if it was already gone."""
        return self._delete("secrets", namespace, name) is not None

    def read_service(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get("services", namespace, name)

    # Custom resources (compute clusters) ---------------------------------------------

    def create_custom(self, kind: CustomKind, body: dict[str, Any]) -> dict[str, Any]:
        path = kind.path(body["metadata"]["namespace"])
        result: dict[str, Any] = _call(self._api, "POST", path, body=body)
        return result

    def read_custom(self, kind: CustomKind, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            result: dict[str, Any] = _call(self._api, "GET", kind.path(namespace, name))
        except KubernetesError as exc:
            if exc.status == 404:
                return None
            raise
        return result

    def patch_custom(
        self, kind: CustomKind, namespace: str, name: str, patch: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """Apply a JSON patch: exactly the fields it names change."""
        result: dict[str, Any] = _call(
            self._api,
            "PATCH",
            kind.path(namespace, name),
            body=patch,
            content_type="application/json-patch+json",
        )
        return result

    def apply_custom(self, kind: CustomKind, body: dict[str, Any]) -> dict[str, Any]:
        """Create the custom object, or replace it if one of ours has its name (as
        ``apply`` does for built-in kinds)."""
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        try:
            return self.create_custom(kind, body)
        except KubernetesError as exc:
            if exc.status != 409:
                raise
        return self._replace(
            kind.path(namespace, name),
            f"{kind.plural} {namespace}/{name}",
            lambda existing: json.loads(json.dumps(body)),
        )

    def _replace(
        self,
        path: str,
        what: str,
        desired: Callable[[dict[str, Any]], dict[str, Any]],
    ) -> dict[str, Any]:
        """Replace an object of ours with ``desired(existing)``, at the version just read.

        A replace that loses to another write (409 ``Conflict``) reads and tries again. The
        other write is usually our own: a replace whose answer was lost to a timeout went
        through, so its retry, at the version read before it, conflicts with itself.
        """
        attempt = 1
        while True:
            existing: dict[str, Any] = _call(self._api, "GET", path)
            if not is_ours(existing):
                raise KubernetesError(409, "AlreadyExists", f"{what} exists and is not ours")
            wanted = desired(existing)
            wanted["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
            try:
                result: dict[str, Any] = _call(self._api, "PUT", path, body=wanted)
            except KubernetesError as exc:
                if exc.status != 409 or exc.reason != "Conflict" or attempt == REPLACE_ATTEMPTS:
                    raise
                attempt += 1
                continue
            return result

    def delete_custom_collection(self, kind: CustomKind, namespace: str) -> list[str]:
        """Ask for the deletion of the service's objects of ``kind`` in ``namespace``, in one
        call; the names of those it deleted (the API server answers with the list), none
        when the API does not serve the kind (its operator is not installed)."""
        query = [("labelSelector", OURS_SELECTOR)]
        try:
            answer = _call(self._api, "DELETE", kind.path(namespace), query=query)
        except KubernetesError as exc:
            if exc.status == 404:
                return []
            raise
        return [str(item["metadata"]["name"]) for item in answer.get("items") or []]

    def delete_custom(self, kind: CustomKind, namespace: str, name: str) -> bool:
        """Ask for the object's deletion; False if it was already gone."""
        try:
            _call(self._api, "DELETE", kind.path(namespace, name))
        except KubernetesError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    # Pods ----------------------------------------------------------------------------

    def read_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get("pods", namespace, name)

    def create_pod(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._create("pods", body)

    def delete_pod(self, namespace: str, name: str) -> bool:
        """Ask for the pod's deletion; False if it was already gone."""
        return self._delete("pods", namespace, name) is not None

    def delete_pod_with_grace(
        self, namespace: str, name: str, *, grace_seconds: int
    ) -> dict[str, Any] | None:
        """Ask for the pod's deletion, giving its containers ``grace_seconds`` to stop; the
        API server's answer (the terminating pod), or None if it was already gone."""
        return self._delete("pods", namespace, name, grace_seconds)

    def read_pod_log(self, namespace: str, name: str, *, tail_lines: int) -> str | None:
        """The last ``tail_lines`` lines the pod's (first) container wrote; None if the pod
        is gone. Bounded by the API server, which reads only the tail."""
        path = resource_path("pods", namespace, name) + "/log"
        query = [("tailLines", str(tail_lines)), ("limitBytes", str(LOG_LIMIT_BYTES))]
        try:
            response = send(self._api, "GET", path, query=query)
        except KubernetesError as exc:
            if exc.status in (400, 404):
                # Gone, or not started yet (no container to read): no log to show.
                return None
            raise
        return bytes(response.data).decode("utf-8", errors="replace")

    def list_pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        return list(self._list("pods", namespace, label_selector=label_selector).get("items") or [])

    # Nodes ---------------------------------------------------------------------------

    def list_nodes(self) -> list[dict[str, Any]]:
        return list(self._list("nodes").get("items") or [])

    def list_events(self, namespace: str) -> list[dict[str, Any]]:
        return list(self._list("events", namespace).get("items") or [])

    def list_tracked(
        self, resource: str, label_selector: str, *, namespace: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """Every object of ``resource`` the selector matches, in ``namespace`` or every
        namespace, and the list's resourceVersion (where a watch of them starts)."""
        result = self._list(resource, namespace, label_selector=label_selector)
        return list(result.get("items") or []), str(result["metadata"]["resourceVersion"])

    def tracked_version(
        self, resource: str, label_selector: str, *, namespace: str | None = None
    ) -> str:
        """Where a watch of the objects the selector matches starts from now: the version of
        a list of at most one of them, so that a watch that needs no copy of the objects
        (``app.engine.feeds``) does not pay for listing every one."""
        result = self._list(resource, namespace, label_selector=label_selector, limit="1")
        return str(result["metadata"]["resourceVersion"])

    def read_tracked(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get(resource, namespace, name)

    # Watches -------------------------------------------------------------------------

    def watch_pod(
        self, namespace: str, name: str, resource_version: str | None, timeout: int
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        return self._watch_named(resource_path("pods", namespace), name, resource_version, timeout)

    def watch_pods(
        self, namespace: str, label_selector: str, resource_version: str | None, timeout: int
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        return self._watch(
            resource_path("pods", namespace),
            resource_version,
            timeout,
            label_selector=label_selector,
        )

    def list_pods_at(self, namespace: str, label_selector: str) -> tuple[list[dict[str, Any]], str]:
        """The pods the selector matches in the namespace, and where a watch of them starts."""
        result = self._list("pods", namespace, label_selector=label_selector)
        return list(result.get("items") or []), str(result["metadata"]["resourceVersion"])

    def watch_namespace(
        self, name: str, resource_version: str | None, timeout: int
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        return self._watch_named(resource_path("namespaces"), name, resource_version, timeout)

    def open_tracked_watch(
        self,
        resource: str,
        label_selector: str,
        resource_version: str,
        timeout: int,
        *,
        namespace: str | None = None,
    ) -> Watch:
        """Start watching the objects of ``resource`` the selector matches, in ``namespace``
        or every namespace; the stream can be cancelled.

        For the elected watcher, which must stop reading at once when it loses its lease
        or the process stops, rather than when the server ends the watch.
        """
        response = _open_watch(
            self._watch_api,
            resource_path(resource, namespace),
            resource_version,
            timeout,
            {"label_selector": label_selector},
        )
        return Watch(response)

    def _watch_named(
        self, path: str, name: str, resource_version: str | None, timeout: int
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Watch the one object called ``name`` among those at ``path``."""
        return self._watch(path, resource_version, timeout, field_selector=f"metadata.name={name}")

    def _watch(
        self,
        path: str,
        resource_version: str | None,
        timeout: int,
        **selectors: str,
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Yield ``(type, object)`` until the server ends the watch after ``timeout``.

        A reader that stops early (its pod ready, its namespace gone) leaves the server
        streaming on the connection until ``timeout``; the rest is read and dropped in the
        background (``_release_when_ended``), so the connection goes back to the pool for
        the next watch instead of being closed, and no watch pays for a new TLS handshake
        while an earlier one's connection waits out its last second.
        """
        response = _open_watch(self._watch_api, path, resource_version, timeout, selectors)
        completed = False
        try:
            yield from _watch_events(response)
            completed = True
        finally:
            if completed:
                response.release_conn()
            else:
                start_task(_release_when_ended, response, name="watch-release")


class Watch:
    """An open watch stream that another thread (or greenlet) may cancel.

    Iterating yields ``(type, object)`` until the server ends the watch, the connection
    drops, or ``cancel`` shuts the socket down. A cancelled stream's connection is closed
    rather than returned to the pool, since unread data may remain on it.
    """

    def __init__(self, response: Any) -> None:
        self._response = response
        self._cancelled = False

    def __iter__(self) -> Iterator[tuple[str, dict[str, Any]]]:
        completed = False
        try:
            yield from _watch_events(self._response)
            completed = not self._cancelled
        finally:
            if completed:
                self._response.release_conn()
            else:
                self._response.close()

    def cancel(self) -> None:
        """End the stream now; the reader sees it end as if the server had closed it."""
        self._cancelled = True
        # Raises when the stream already finished or was released: nothing to interrupt.
        with contextlib.suppress(OSError, RuntimeError, ValueError):
            self._response.shutdown()


def _open_watch(
    api: k8s.ApiClient,
    path: str,
    resource_version: str | None,
    timeout: int,
    selectors: dict[str, str],
) -> Any:
    """Send a watch request; its response is the raw, unread urllib3 stream."""
    query: list[tuple[str, Any]] = [("watch", True), ("timeoutSeconds", timeout)]
    if resource_version:
        query.append(("resourceVersion", resource_version))
    query += [(_QUERY_NAMES[key], value) for key, value in selectors.items()]
    try:
        return send(api, "GET", path, query=query, timeout=timeout + WATCH_SLACK_SECONDS)
    except KubernetesError as exc:
        if exc.status == 410:
            raise WatchExpired from None
        raise


def _release_when_ended(response: Any) -> None:
    """Read what is left of a watch its reader left until the server ends it (within the
    watch's ``timeoutSeconds``, under the read deadline it was opened with), then return
    the connection to the pool. urllib3 never hands out a pooled connection with unread
    data waiting on it, so one whose read failed half-way is closed then instead."""
    response.drain_conn()
    response.release_conn()


def _watch_events(response: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """Parse a watch stream's JSON lines; raises ``WatchExpired`` on a 410 error event.

    The stream is read with ``read1`` (what has arrived, as it arrives) rather than through
    urllib3's ``stream`` generator, which closes the connection when a reader leaves it
    early: the rest of the watch is then still there to read to its end
    (``_release_when_ended``), and the connection to reuse."""
    try:
        buffer = b""
        while chunk := response.read1(65536, decode_content=False):
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if not line.strip():
                    continue
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object", {})
                    if status.get("code") == 410:
                        raise WatchExpired
                    raise KubernetesError(
                        int(status.get("code") or 500),
                        str(status.get("reason", "")),
                        str(status.get("message", "watch error")),
                    )
                yield event["type"], event["object"]
    except (HTTPError, OSError) as exc:
        # A dropped or timed-out stream ends the watch; the caller re-watches from the
        # last resourceVersion it saw.
        logger.debug("watch ended: %s", type(exc).__name__)
