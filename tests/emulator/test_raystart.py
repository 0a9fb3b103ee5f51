"""KubeRay's ``ray start`` line and Ray container, as the simulated operator builds them."""

from __future__ import annotations

from devstack.kube.cluster.operators.raystart import (
    HEAD,
    WORKER,
    complete_params,
    head_port,
    ray_container,
    ray_env,
    start_command,
)

LIMITS = {"limits": {"cpu": "1500m", "memory": "2Gi"}, "requests": {"cpu": "500m"}}


def test_a_head_gets_kuberays_defaults_and_its_resources() -> None:
    params = complete_params(HEAD, {"dashboard-host": "127.0.0.1"}, LIMITS, "unused:6379")
    assert params == {
        "dashboard-host": "127.0.0.1",
        "metrics-export-port": "8080",
        "block": "true",
        "dashboard-agent-listen-port": "52365",
        "num-cpus": "2",  # the limit, rounded up
        "memory": str(2 * 2**30),
    }


def test_a_worker_is_pointed_at_the_head_and_sized_by_its_request_without_a_limit() -> None:
    resources = {"requests": {"cpu": "3"}, "limits": {"nvidia.com/gpu": "1"}}
    params = complete_params(WORKER, {"num-cpus": "1"}, resources, "h.ns.svc.cluster.local:6379")
    assert params["address"] == "h.ns.svc.cluster.local:6379"
    assert params["num-cpus"] == "1"  # the group's own value stands
    assert params["num-gpus"] == "1"
    assert "memory" not in params and "dashboard-host" not in params
    resources = {"requests": {"cpu": "3"}}
    assert complete_params(WORKER, {}, resources, "h:6379")["num-cpus"] == "3"


def test_the_head_port_is_the_heads_port_param_else_6379() -> None:
    assert head_port({}) == "6379"
    assert head_port({"port": 7000}) == "7000"


def test_flags_come_in_name_order_with_switches_for_true_and_false_left_out() -> None:
    params = {"num-cpus": "1", "block": "true", "disable-usage-stats": "false"}
    params |= {"include-dashboard": "false", "address": "h:6379"}
    assert start_command(WORKER, params) == (
        "ray start --address=h:6379 --block --include-dashboard=false --num-cpus=1"
    )
    assert start_command(HEAD, {"block": "True"}) == "ray start --head --block"


def test_the_container_runs_ray_start_through_bash_after_its_own_command() -> None:
    env = ray_env(WORKER, "ray start --block", "h:6379", "6379", "h")
    plain = ray_container({"name": "ray", "image": "ray"}, "ray start --block", env)
    assert plain["command"] == ["/bin/bash", "-c", "--"]
    assert plain["args"] == ["ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}; ray start --block"]
    given = {"name": "ray", "command": ["echo"], "args": ["hi"], "env": [{"name": "RAY_PORT"}]}
    built = ray_container(given, "ray start --block", env)
    assert built["args"][0].startswith("echo hi && ulimit -n ")
    names = [e["name"] for e in built["env"]]
    assert names.count("RAY_PORT") == 1 and names[0] == "RAY_PORT"  # its own is kept
    assert {"FQ_RAY_IP", "RAY_ADDRESS", "KUBERAY_GEN_RAY_START_CMD"} <= set(names)
    own = {"name": "ray", "args": ["ray start --head --block"]}
    assert ray_container(own, "ray start --block", env)["args"] == own["args"]


def test_kuberays_variables_say_where_the_gcs_is_and_what_the_node_is() -> None:
    head = ray_env(HEAD, "ray start --head", "127.0.0.1:6379", "6379", "h")
    assert head["RAY_ADDRESS"] == {"value": "127.0.0.1:6379"}
    assert head["RAY_NODE_TYPE_NAME"] == {
        "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['ray.io/group']"}}
    }
    assert "FQ_RAY_IP" not in head
    worker = ray_env(WORKER, "ray start", "h:6379", "6379", "h")
    assert worker["FQ_RAY_IP"] == {"value": "h"}
