"""The Kubernetes calls the service makes for labs, as plain JSON dicts.

Responses are read as raw JSON (``_preload_content=False``) instead of the client's
pydantic models: it is faster, and the strict models reject objects a real API server may
legitimately return. Every call carries the client's deadline (see ``DeadlineApiClient``).
Watches are read line by line here, because the client's own watch helper mishandles
error events when asked not to deserialize.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import time
from collections.abc import Callable, Iterator
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from app.builders.names import MANAGED_BY, MANAGED_BY_LABEL

logger = logging.getLogger(__name__)

WATCH_SLACK_SECONDS = 5
"""Read deadline beyond a watch's own ``timeoutSeconds``."""

TRANSIENT_STATUSES = frozenset({0, 429, 500, 502, 503, 504})
"""Answers worth trying again: unreachable or timed out (0), throttled, server trouble."""

RETRY_ATTEMPTS = 4
RETRY_BASE_SECONDS = 0.2


class KubernetesError(Exception):
    """A Kubernetes call failed; ``status`` is the HTTP code (0 when unreachable)."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message


class WatchExpired(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""


def _error(exc: ApiException) -> KubernetesError:
    message = exc.reason or "error"
    reason = ""
    try:
        body = json.loads(exc.body) if exc.body else {}
        message = body.get("message", message)
        reason = body.get("reason", "")
    except (TypeError, ValueError):
        pass
    return KubernetesError(exc.status or 0, reason, message)


def _call_once(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    kwargs["_preload_content"] = False
    try:
        response = fn(*args, **kwargs)
    except ApiException as exc:
        raise _error(exc) from None
    except (HTTPError, OSError) as exc:
        raise KubernetesError(0, "Unreachable", f"Kubernetes API unreachable: {exc}") from None
    return json.loads(response.data)


def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Make the call, retrying what a busy or restarting API server answers.

    Every caller is idempotent about a retried write: a create that did happen before its
    answer was lost comes back as 409 and is adopted, a repeated delete as 404. So a timeout
    or a 5xx costs a short, jittered backoff instead of a failed spawn.
    """
    for attempt in range(RETRY_ATTEMPTS):
        try:
            return _call_once(fn, *args, **kwargs)
        except KubernetesError as exc:
            if exc.status not in TRANSIENT_STATUSES or attempt == RETRY_ATTEMPTS - 1:
                raise
            delay = RETRY_BASE_SECONDS * (2**attempt)
            logger.info("Kubernetes %s (%s); retrying in %.2fs", exc.status, exc.reason, delay)
            time.sleep(delay * (0.5 + random.random()))  # noqa: S311 (jitter, not crypto)
    raise AssertionError("unreachable")


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


class KubernetesStorage:
    """Create, read, watch and delete the objects of labs."""

    def __init__(self, api_client: k8s.ApiClient) -> None:
        self._core = k8s.CoreV1Api(api_client)
        self._networking = k8s.NetworkingV1Api(api_client)
        self._namespaced_ops: dict[str, tuple[Callable[..., Any], ...]] = {
            "configmaps": (
                self._core.create_namespaced_config_map,
                self._core.read_namespaced_config_map,
                self._core.replace_namespaced_config_map,
            ),
            "secrets": (
                self._core.create_namespaced_secret,
                self._core.read_namespaced_secret,
                self._core.replace_namespaced_secret,
            ),
            "services": (
                self._core.create_namespaced_service,
                self._core.read_namespaced_service,
                self._core.replace_namespaced_service,
            ),
            "resourcequotas": (
                self._core.create_namespaced_resource_quota,
                self._core.read_namespaced_resource_quota,
                self._core.replace_namespaced_resource_quota,
            ),
            "networkpolicies": (
                self._networking.create_namespaced_network_policy,
                self._networking.read_namespaced_network_policy,
                self._networking.replace_namespaced_network_policy,
            ),
        }

    # Namespaces ----------------------------------------------------------------------

    def read_namespace(self, name: str) -> dict[str, Any] | None:
        try:
            result: dict[str, Any] = _call(self._core.read_namespace, name)
        except KubernetesError as exc:
            if exc.status == 404:
                return None
            raise
        return result

    def create_namespace(self, body: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = _call(self._core.create_namespace, body)
        return result

    def delete_namespace(self, name: str) -> None:
        try:
            _call(self._core.delete_namespace, name)
        except KubernetesError as exc:
            if exc.status != 404:
                raise

    def list_lab_namespaces(self) -> list[dict[str, Any]]:
        selector = f"{MANAGED_BY_LABEL}={MANAGED_BY}"
        result = _call(self._core.list_namespace, label_selector=selector)
        return list(result.get("items") or [])

    # Namespaced objects other than pods ----------------------------------------------

    def apply(self, resource: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create the object, or replace it if an object of ours already has its name.

        Idempotent, so a resumed operation can repeat the step; an object with the same
        name that we do not manage is left alone and reported.
        """
        create, read, replace = self._namespaced_ops[resource]
        namespace = body["metadata"]["namespace"]
        name = body["metadata"]["name"]
        try:
            result: dict[str, Any] = _call(create, namespace, body)
            return result
        except KubernetesError as exc:
            if exc.status != 409:
                raise
        if resource in REPLACED_UNREAD:
            unconditional = json.loads(json.dumps(body))
            unconditional["metadata"].pop("resourceVersion", None)
            result = _call(replace, name, namespace, unconditional)
            return result
        existing: dict[str, Any] = _call(read, name, namespace)
        if not is_ours(existing):
            raise KubernetesError(
                409, "AlreadyExists", f"{resource} {namespace}/{name} exists and is not ours"
            )
        desired = json.loads(json.dumps(body))
        desired["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
        if resource == "services":
            desired["spec"]["clusterIP"] = existing.get("spec", {}).get("clusterIP")
        result = _call(replace, name, namespace, desired)
        return result

    def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            result: dict[str, Any] = _call(self._core.read_namespaced_secret, name, namespace)
        except KubernetesError as exc:
            if exc.status == 404:
                return None
            raise
        return result

    # Pods ----------------------------------------------------------------------------

    def read_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            result: dict[str, Any] = _call(self._core.read_namespaced_pod, name, namespace)
        except KubernetesError as exc:
            if exc.status == 404:
                return None
            raise
        return result

    def create_pod(self, body: dict[str, Any]) -> dict[str, Any]:
        namespace = body["metadata"]["namespace"]
        result: dict[str, Any] = _call(self._core.create_namespaced_pod, namespace, body)
        return result

    def delete_pod(self, namespace: str, name: str) -> bool:
        """Ask for the pod's deletion; False if it was already gone."""
        try:
            _call(self._core.delete_namespaced_pod, name, namespace)
        except KubernetesError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def list_pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        result = _call(self._core.list_namespaced_pod, namespace, label_selector=label_selector)
        return list(result.get("items") or [])

    # Nodes ---------------------------------------------------------------------------

    def list_nodes(self) -> list[dict[str, Any]]:
        result = _call(self._core.list_node)
        return list(result.get("items") or [])

    def list_events(self, namespace: str) -> list[dict[str, Any]]:
        result = _call(self._core.list_namespaced_event, namespace)
        return list(result.get("items") or [])

    def list_lab_pods(self, label_selector: str) -> tuple[list[dict[str, Any]], str]:
        result = _call(self._core.list_pod_for_all_namespaces, label_selector=label_selector)
        return list(result.get("items") or []), str(result["metadata"]["resourceVersion"])

    # Watches -------------------------------------------------------------------------

    def watch_pod(
        self, namespace: str, name: str, resource_version: str | None, timeout: int
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        return self._watch(
            self._core.list_namespaced_pod,
            (namespace,),
            resource_version,
            timeout,
            field_selector=f"metadata.name={name}",
        )

    def watch_namespace(
        self, name: str, resource_version: str | None, timeout: int
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        return self._watch(
            self._core.list_namespace,
            (),
            resource_version,
            timeout,
            field_selector=f"metadata.name={name}",
        )

    def watch_lab_pods(
        self, label_selector: str, resource_version: str, timeout: int
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        return self._watch(
            self._core.list_pod_for_all_namespaces,
            (),
            resource_version,
            timeout,
            label_selector=label_selector,
        )

    def open_lab_pod_watch(self, label_selector: str, resource_version: str, timeout: int) -> Watch:
        """Start watching lab pods in every namespace; the stream can be cancelled.

        For the elected watcher, which must stop reading at once when it loses its lease
        or the process stops, rather than when the server ends the watch.
        """
        response = _open_watch(
            self._core.list_pod_for_all_namespaces,
            (),
            resource_version,
            timeout,
            {"label_selector": label_selector},
        )
        return Watch(response)

    def _watch(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        resource_version: str | None,
        timeout: int,
        **selectors: str,
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Yield ``(type, object)`` until the server ends the watch after ``timeout``."""
        response = _open_watch(fn, args, resource_version, timeout, selectors)
        try:
            yield from _watch_events(response)
        finally:
            response.release_conn()


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
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    resource_version: str | None,
    timeout: int,
    selectors: dict[str, str],
) -> Any:
    """Send a watch request; its response is the raw, unread urllib3 stream."""
    kwargs: dict[str, Any] = {
        "watch": True,
        "timeout_seconds": timeout,
        "_request_timeout": timeout + WATCH_SLACK_SECONDS,
        "_preload_content": False,
        **selectors,
    }
    if resource_version:
        kwargs["resource_version"] = resource_version
    try:
        return fn(*args, **kwargs)
    except ApiException as exc:
        if exc.status == 410:
            raise WatchExpired from None
        raise _error(exc) from None
    except (HTTPError, OSError) as exc:
        raise KubernetesError(0, "Unreachable", f"Kubernetes API unreachable: {exc}") from None


def _watch_events(response: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """Parse a watch stream's JSON lines; raises ``WatchExpired`` on a 410 error event."""
    try:
        buffer = b""
        for chunk in response.stream(amt=65536, decode_content=False):
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
