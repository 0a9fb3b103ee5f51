"""The ingress proxy plays ingress-nginx over the emulator's Ingresses: GafaelfawrIngresses are
enforced by the Gafaelfawr emulator, requests reach pods that run as real processes, and the
local stack serves its group apps (``devstack/images/app.py``) at ``ingress_url``."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import kubernetes.client
import pytest
import requests

from devstack.demo import demo_group_mapping, demo_tokens, demo_users
from devstack.gafaelfawr import GafaelfawrEmulator
from devstack.images import DEFAULT_PROGRAMS, load_programs
from devstack.ingress import IngressProxy
from devstack.kube import KubernetesEmulator
from devstack.kube.cluster import ClusterSettings
from devstack.kube.cluster.programs import ImageProgram
from devstack.kube.crds import crd
from devstack.stack import LocalStack, StackOptions
from tests.labs.conftest import wait_for

NAMESPACE = "apps-test"
GROUP, VERSION, PLURAL = "gafaelfawr.lsst.io", "v1alpha1", "gafaelfawringresses"
ECHO_IMAGE = "registry.test/echo:1"
APP_IMAGE = "registry.test/lsstsqre/demo-app:1.0"

ECHO_SERVER = r"""
import http.server, json, os, time

class Echo(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().strip(), 16)
                if not size:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def answer(self):
        received = self.body()
        if self.path.endswith("/stream"):
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.chunk(b"first;")
            while not os.path.exists("flag"):
                time.sleep(0.02)
            self.chunk(b"second")
            self.wfile.write(b"0\r\n\r\n")
            return
        payload = json.dumps({
            "method": self.command,
            "path": self.path,
            "headers": dict(self.headers.items()),
            "body": received.decode(),
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Set-Cookie", "a=1")
        self.send_header("Set-Cookie", "b=2")
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = do_OPTIONS = answer
    do_PROPFIND = do_PROPPATCH = do_MKCOL = do_COPY = do_MOVE = do_LOCK = do_UNLOCK = answer

    def log_message(self, *args):
        pass

http.server.ThreadingHTTPServer((os.environ["POD_IP"], 8080), Echo).serve_forever()
"""


@dataclass
class Apps:
    """A cluster with the Gafaelfawr operator, the Gafaelfawr emulator and the ingress proxy."""

    kube: KubernetesEmulator
    gafaelfawr: GafaelfawrEmulator
    proxy: IngressProxy
    core: kubernetes.client.CoreV1Api
    networking: kubernetes.client.NetworkingV1Api
    objects: kubernetes.client.CustomObjectsApi

    def get(self, path: str, user: str | None = None, **kwargs: Any) -> requests.Response:
        headers = dict(kwargs.pop("headers", {}))
        if user is not None:
            headers["Authorization"] = f"Bearer {demo_tokens()[user].token}"
        timeout = kwargs.pop("timeout", 10)
        return requests.get(self.proxy.url + path, headers=headers, timeout=timeout, **kwargs)

    def gafaelfawr_ingress(
        self, name: str, path: str, config: dict[str, Any], service: str = "echo", port: int = 80
    ) -> None:
        rule = {"http": {"paths": [_path(path, service, port=port)]}}
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "GafaelfawrIngress",
            "metadata": {"name": name},
            "config": config,
            "template": {"metadata": {"name": name}, "spec": {"rules": [rule]}},
        }
        self.objects.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, body)

    def ingress(self, name: str, rules: list[dict[str, Any]], **annotations: str) -> None:
        metadata = {"name": name, "annotations": annotations}
        self.networking.create_namespaced_ingress(
            NAMESPACE, {"metadata": metadata, "spec": {"rules": rules}}
        )


def _path(path: str, service: str = "echo", kind: str = "Prefix", port: int = 80) -> Any:
    backend = {"service": {"name": service, "port": {"number": port}}}
    return {"path": path, "pathType": kind, "backend": backend}


def _pod(name: str, image: str, labels: dict[str, str], **container: Any) -> dict[str, Any]:
    probe = {"tcpSocket": {"port": 8080}, "periodSeconds": 1}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "ports": [{"name": "http", "containerPort": 8080}],
                    "readinessProbe": probe,
                    **container,
                }
            ],
        },
    }


@pytest.fixture(scope="module")
def apps() -> Iterator[Apps]:
    programs = {
        **load_programs(DEFAULT_PROGRAMS),
        "registry.test/echo": ImageProgram(entrypoint=(sys.executable, "-c", ECHO_SERVER)),
    }
    gafaelfawr = GafaelfawrEmulator(
        users=demo_users(), tokens=demo_tokens(), group_mapping=demo_group_mapping()
    ).start()
    settings = ClusterSettings(programs=programs, gafaelfawr_url=gafaelfawr.url)
    kube = KubernetesEmulator(settings=settings).start()
    proxy = IngressProxy(kube.store).start()
    client = kube.api_client()
    try:
        kube.cluster.add_node("node-1")
        kubernetes.client.ApiextensionsV1Api(client).create_custom_resource_definition(crd(PLURAL))
        wait_for(lambda: kube.served.by_plural(PLURAL))
        core = kubernetes.client.CoreV1Api(client)
        core.create_namespace({"metadata": {"name": NAMESPACE}})
        core.create_namespaced_pod(NAMESPACE, _pod("echo", ECHO_IMAGE, {"app": "echo"}))
        service = {"selector": {"app": "echo"}, "ports": [{"port": 80, "targetPort": "http"}]}
        core.create_namespaced_service(NAMESPACE, {"metadata": {"name": "echo"}, "spec": service})
        yield Apps(
            kube,
            gafaelfawr,
            proxy,
            core,
            kubernetes.client.NetworkingV1Api(client),
            kubernetes.client.CustomObjectsApi(client),
        )
    finally:
        client.close()
        proxy.stop()
        kube.stop()
        gafaelfawr.stop()


def _status_when_served(apps: Apps, path: str, user: str | None = None) -> int:
    """The status once the path is routed and its backend is up (a 404 or 503 before)."""
    return int(wait_for(lambda: _routed(apps.get(path, user))))


def _routed(response: requests.Response) -> int:
    """The response's status once it comes from past the proxy's routing, else 0."""
    return 0 if response.status_code in (404, 502, 503) else response.status_code


def test_an_anonymous_ingress_lets_anyone_in_without_their_gafaelfawr_credentials(
    apps: Apps,
) -> None:
    apps.gafaelfawr_ingress("open", "/open/", {"scopes": {"anonymous": True}})
    assert _status_when_served(apps, "/open/") == 200
    cookies = {"Cookie": f"gafaelfawr={demo_tokens()['wile'].token}; theme=dark"}
    seen = apps.get("/open/page?x=1", "rachel", headers=cookies).json()
    assert (seen["method"], seen["path"]) == ("GET", "/open/page?x=1")
    headers = seen["headers"]
    assert "Authorization" not in headers
    assert headers["Cookie"] == "theme=dark"
    assert "X-Auth-Request-User" not in headers
    assert headers["X-Original-URI"] == "/open/page?x=1"
    assert headers["X-Forwarded-Proto"] == "http"


def test_a_scoped_ingress_refuses_no_token_and_the_wrong_one_and_admits_the_right_one(
    apps: Apps,
) -> None:
    config = {"scopes": {"all": ["app:lsst-data"]}, "service": "apps"}
    apps.gafaelfawr_ingress("group", "/group/", config)
    assert _status_when_served(apps, "/group/") == 401
    missing = apps.get("/group/")
    assert missing.headers["WWW-Authenticate"] == 'Bearer realm="gafaelfawr-emulator"'
    wrong = apps.get("/group/", "wile")
    assert wrong.status_code == 403
    assert 'error="insufficient_scope"' in wrong.headers["WWW-Authenticate"]
    assert wrong.json()["detail"][0]["msg"] == "Token missing required scope"
    admitted = apps.get("/group/", "rachel", headers={"X-Auth-Request-User": "wile"})
    assert admitted.status_code == 200
    headers = admitted.json()["headers"]
    assert headers["X-Auth-Request-User"] == "rachel"
    assert headers["X-Auth-Request-Email"] == "rachel@example.com"
    assert "Authorization" not in headers  # her token stays with the ingress
    assert apps.get("/group/", "admin-user").json()["headers"]["X-Auth-Request-User"] == (
        "admin-user"
    )


def test_a_forged_identity_never_reaches_a_backend(apps: Apps) -> None:
    """Not even through an Ingress that asks no one."""
    apps.ingress("plain", [{"http": {"paths": [_path("/plain/")]}}])
    assert _status_when_served(apps, "/plain/") == 200
    forged = {"X-Auth-Request-User": "admin", "X-Auth-Request-Token": "gt-x.y"}
    headers = apps.get("/plain/", headers=forged).json()["headers"]
    assert not {h for h in headers if h.lower().startswith("x-auth-request-")}


def test_a_login_redirect_sends_a_browser_to_gafaelfawr_and_its_cookie_gets_it_in(
    apps: Apps,
) -> None:
    config = {"scopes": {"any": ["exec:notebook"]}, "loginRedirect": True}
    apps.gafaelfawr_ingress("browser", "/browser/", config)
    wait_for(lambda: apps.get("/browser/", allow_redirects=False).status_code == 302)
    redirect = apps.get("/browser/x", allow_redirects=False)
    location = urlsplit(redirect.headers["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == apps.gafaelfawr.url + "/login"
    assert parse_qs(location.query)["rd"] == [apps.proxy.url + "/browser/x"]
    session = requests.Session()
    login = {"token": demo_tokens()["wile"].token, "rd": apps.proxy.url + "/browser/x"}
    landed = session.post(apps.gafaelfawr.url + "/login", data=login, timeout=10)
    assert landed.status_code == 200
    assert landed.json()["headers"]["X-Auth-Request-User"] == "wile"
    assert "gafaelfawr=" not in landed.json()["headers"].get("Cookie", "")


def test_paths_hosts_and_regexes_choose_as_ingress_nginx_does(apps: Apps) -> None:
    apps.ingress(
        "routes",
        [
            {"http": {"paths": [_path("/exact", kind="Exact"), _path("/pre/fix/")]}},
            {"host": "apps.example.org", "http": {"paths": [_path("/hosted/")]}},
        ],
    )
    apps.ingress(
        "regex",
        [{"http": {"paths": [_path("/re/[0-9]+/", kind="ImplementationSpecific")]}}],
        **{"nginx.ingress.kubernetes.io/use-regex": "true"},
    )
    assert _status_when_served(apps, "/exact") == 200
    expected = {
        "/exact/more": 404,
        "/pre/fix": 200,
        "/pre/fix/deeper": 200,
        "/pre/fixture": 404,
        "/re/42/x": 200,
        "/re/ab/": 404,
        "/hosted/": 404,
        "/nowhere": 404,
    }
    assert {path: apps.get(path).status_code for path in expected} == expected
    hosted = apps.get("/hosted/", headers={"Host": "apps.example.org:8080"})
    assert hosted.status_code == 200
    # A host with rules of its own does not fall back to the rules for any host.
    assert apps.get("/pre/fix/", headers={"Host": "apps.example.org"}).status_code == 404


def test_a_backend_with_nowhere_to_go_is_a_503(apps: Apps) -> None:
    service = {"selector": {"app": "nobody"}, "ports": [{"port": 80}]}
    apps.core.create_namespaced_service(NAMESPACE, {"metadata": {"name": "empty"}, "spec": service})
    apps.ingress(
        "dead-ends",
        [{"http": {"paths": [_path("/empty/", "empty"), _path("/missing/", "missing")]}}],
    )
    wait_for(lambda: apps.get("/empty/").status_code != 404)
    for path in ("/empty/", "/missing/"):
        response = apps.get(path)
        assert response.status_code == 503, path
        assert "Service Unavailable" in response.text


def test_bodies_stream_both_ways(apps: Apps) -> None:
    apps.gafaelfawr_ingress("bodies", "/bodies/", {"scopes": {"anonymous": True}})
    assert _status_when_served(apps, "/bodies/") == 200
    sized = requests.post(apps.proxy.url + "/bodies/x", data=b"hello", timeout=10).json()
    assert (sized["method"], sized["body"]) == ("POST", "hello")
    chunked = requests.put(
        apps.proxy.url + "/bodies/y", data=iter([b"one,", b"two"]), timeout=10
    ).json()
    assert chunked["body"] == "one,two"
    # Several Set-Cookie headers come back as they were sent.
    response = requests.get(apps.proxy.url + "/bodies/", timeout=10)
    assert response.raw.headers.getlist("Set-Cookie") == ["a=1", "b=2"]

    pod = apps.core.read_namespaced_pod("echo", NAMESPACE)
    flag = apps.kube.cluster.processes.pod_dir(pod.metadata.uid) / "home" / "flag"
    with requests.get(apps.proxy.url + "/bodies/stream", stream=True, timeout=10) as streamed:
        assert streamed.headers["Transfer-Encoding"] == "chunked"
        chunks = streamed.raw.stream(None, decode_content=False)
        # The first part arrives while the backend still waits: nothing is buffered whole.
        assert next(chunks) == b"first;"
        flag.write_text("")
        assert b"".join(chunks) == b"second"


def test_webdav_methods_reach_the_backend_with_their_headers_and_bodies_unchanged(
    apps: Apps,
) -> None:
    """WebDAV's methods and headers pass as sent: ``Destination`` (a full URL naming the
    proxy's own address), ``Depth``, ``Overwrite`` and the client's ``Host``."""
    apps.gafaelfawr_ingress("dav", "/dav/", {"scopes": {"anonymous": True}})
    assert _status_when_served(apps, "/dav/") == 200
    destination = apps.proxy.url + "/dav/b%20c.txt"
    host = apps.proxy.url.removeprefix("http://")
    sent = {
        "Destination": destination,
        "Depth": "infinity",
        "Overwrite": "F",
        "Content-Type": "application/xml",
    }
    body = '<?xml version="1.0"?><propfind xmlns="DAV:"><allprop/></propfind>'
    for method in ("OPTIONS", "PROPFIND", "PROPPATCH", "MKCOL", "COPY", "MOVE", "DELETE", "LOCK"):
        response = requests.request(
            method, apps.proxy.url + "/dav/a.txt", headers=sent, data=body, timeout=10
        )
        assert response.status_code == 200, method
        seen = response.json()
        assert (seen["method"], seen["path"], seen["body"]) == (method, "/dav/a.txt", body)
        headers = seen["headers"]
        assert headers["Destination"] == destination, method
        assert (headers["Depth"], headers["Overwrite"], headers["Host"]) == ("infinity", "F", host)


def test_deleting_the_gafaelfawringress_takes_its_path_away(apps: Apps) -> None:
    apps.gafaelfawr_ingress("brief", "/brief/", {"scopes": {"anonymous": True}})
    assert _status_when_served(apps, "/brief/") == 200
    apps.objects.delete_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, "brief")
    wait_for(lambda: apps.get("/brief/").status_code == 404)


def test_the_app_program_answers_under_its_base_url_with_its_environment(apps: Apps) -> None:
    env = {
        "APP_ID": "a1",
        "APP_BASE_URL": "/apps/a1/",
        "GROUP": "lsst-data",
        "GREETING": "hello",
    }
    labels = {"app": "a1"}
    pod = _pod("app-a1", APP_IMAGE, labels, env=[{"name": k, "value": v} for k, v in env.items()])
    apps.core.create_namespaced_pod(NAMESPACE, pod)
    service = {"selector": labels, "ports": [{"port": 8080, "targetPort": "http"}]}
    apps.core.create_namespaced_service(
        NAMESPACE, {"metadata": {"name": "app-a1"}, "spec": service}
    )
    config = {"scopes": {"any": ["exec:notebook"]}, "service": "apps"}
    apps.gafaelfawr_ingress("app-a1", "/apps/a1/", config, "app-a1", 8080)
    assert _status_when_served(apps, "/apps/a1/", "rachel") == 200
    assert apps.get("/apps/a1/", "rachel").json() == {"env": env, "user": "rachel"}
    assert apps.get("/apps/a1/healthz", "wile").json() == {"status": "ok"}
    assert apps.get("/apps/a1/elsewhere", "wile").status_code == 404
    moved = apps.get("/apps/a1", "wile", allow_redirects=False)
    assert (moved.status_code, moved.headers["Location"]) == (308, "/apps/a1/")

    def logged() -> bool:
        log = apps.core.read_namespaced_pod_log("app-a1", NAMESPACE)
        return "GET /apps/a1/ 200 user=rachel" in log and "/apps/a1/elsewhere 404" in log

    wait_for(logged)


def test_the_local_stack_serves_group_apps_at_its_ingress_url(
    real_lab_stack: LocalStack,
) -> None:
    """Through ``make run``'s stack: the registry's app image runs ``app.py``, the Gafaelfawr
    operator makes the Ingress, and group members alone get in at ``ingress_url``."""
    stack = real_lab_stack
    state = stack.state()
    assert state["ingress_url"] == stack.ingress.url
    assert state["group_mapping"]["app:lsst-data"] == ["lsst-data"]
    assert "app:lsst-data" in state["tokens"]["admin-user"]["scopes"]
    assert "app:lsst-data" not in state["tokens"]["wile"]["scopes"]
    assert stack.kube.cluster.settings.gafaelfawr_url == stack.gafaelfawr.url
    client = stack.kube.api_client()
    try:
        core = kubernetes.client.CoreV1Api(client)
        namespace = "stack-apps-test"
        core.create_namespace({"metadata": {"name": namespace}})
        image = f"{stack.registry.host}/lsstsqre/demo-app:1.1"
        env = [
            {"name": "APP_ID", "value": "s1"},
            {"name": "APP_BASE_URL", "value": "/apps/s1/"},
            {"name": "GROUP", "value": "lsst-data"},
        ]
        core.create_namespaced_pod(namespace, _pod("app-s1", image, {"app": "s1"}, env=env))
        service = {"selector": {"app": "s1"}, "ports": [{"port": 8080, "targetPort": "http"}]}
        core.create_namespaced_service(namespace, {"metadata": {"name": "app-s1"}, "spec": service})
        backend = {"service": {"name": "app-s1", "port": {"number": 8080}}}
        rule = {
            "http": {"paths": [{"path": "/apps/s1/", "pathType": "Prefix", "backend": backend}]}
        }
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "GafaelfawrIngress",
            "metadata": {"name": "app-s1"},
            "config": {"scopes": {"all": ["app:lsst-data"]}, "service": "apps"},
            "template": {"metadata": {"name": "app-s1"}, "spec": {"rules": [rule]}},
        }
        objects = kubernetes.client.CustomObjectsApi(client)
        objects.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)

        def as_user(name: str) -> requests.Response:
            token = state["tokens"][name]["token"]
            headers = {"Authorization": f"Bearer {token}"}
            return requests.get(state["ingress_url"] + "/apps/s1/", headers=headers, timeout=10)

        assert wait_for(lambda: _routed(as_user("admin-user")), timeout=60) == 200
        admitted = as_user("admin-user")
        assert admitted.json()["env"] == {
            "APP_ID": "s1",
            "APP_BASE_URL": "/apps/s1/",
            "GROUP": "lsst-data",
        }
        assert admitted.json()["user"] == "admin-user"
        assert as_user("rachel").json()["user"] == "rachel"
        assert as_user("wile").status_code == 403
        core.delete_namespace(namespace)
    finally:
        client.close()


def test_the_stack_points_its_apps_at_its_ingress_and_registry(tmp_path: Path) -> None:
    """When the service's configuration has apps, the stack serves them and their images."""
    template = {
        "name": "demo",
        "podTemplate": {"containers": [{"name": "app", "image": "127.0.0.1:8192/x/app:1"}]},
    }
    options = StackOptions(
        state_dir=tmp_path, real_labs=True, config_overrides={"apps": {"templates": [template]}}
    )
    stack = LocalStack(options)
    started = [stack.registry.start(), stack.gafaelfawr.start(), stack.ingress.start()]
    try:
        apps = stack.service_config()["apps"]
        assert apps["baseUrl"] == stack.ingress.url
        image = apps["templates"][0]["podTemplate"]["containers"][0]["image"]
        assert image == f"{stack.registry.host}/x/app:1"
    finally:
        for emulator in reversed(started):
            emulator.stop()
