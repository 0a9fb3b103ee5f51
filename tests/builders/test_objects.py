"""Service, NetworkPolicy, ResourceQuota, Namespace, names and the whole set."""

from __future__ import annotations

import dataclasses

import pytest

from app.builders.names import SPEC_ANNOTATION, lab_namespace, object_name
from app.builders.record import lab_record, spec_from_annotation
from app.builders.resource_quota import quotas
from app.config import Config
from app.models.lab import PodState
from app.models.workload import WorkloadStatus
from app.workloads.lab.builders import LabObjects, build_lab, internal_url, service_address
from app.workloads.lab.records import lab_record as status_record
from tests.builders.conftest import COPIED, PULL_DATA, TOKEN, WILE, make_config, make_spec


def _build(
    config: Config, *, size: str = "medium", debug: bool = False, env: dict[str, str] | None = None
) -> LabObjects:
    """Wile's lab on a first spawn, with the inputs the configuration needs."""
    copied = {s.secret_key: COPIED[s.secret_key] for s in config.lab.secrets}
    pull = PULL_DATA if config.lab.pull_secret else None
    return build_lab(
        make_spec(config, WILE, size=size, debug=debug, env=env),
        config,
        token=TOKEN,
        copied_secrets=copied,
        pull_secret_data=pull,
        provision=True,
    )


def test_names() -> None:
    assert lab_namespace("nublado", "wile") == "nublado-wile"
    assert object_name("wile") == "nb-wile"
    assert object_name("wile", "env") == "nb-wile-env"


def test_object_names_and_namespaces(full_config: Config) -> None:
    objects = _build(full_config)
    named = {(plural, o["metadata"]["name"]) for plural, o in objects.in_creation_order()}
    assert named == {
        ("namespaces", "nublado-wile"),
        ("configmaps", "nb-wile-env"),
        ("configmaps", "nb-wile-nss"),
        ("secrets", "nb-wile"),
        ("secrets", "nb-wile-pull"),
        ("services", "nb-wile-lab"),
        ("networkpolicies", "nb-wile-lab"),
        ("resourcequotas", "nb-wile-quota"),
        ("pods", "nb-wile-lab"),
    }
    assert "namespace" not in objects.namespace["metadata"]
    for obj in objects.all()[1:]:
        assert obj["metadata"]["namespace"] == "nublado-wile"


def test_namespace_prefix_is_configurable() -> None:
    config = dataclasses.replace(make_config(), namespace_prefix="labs")
    objects = _build(config)
    assert objects.namespace["metadata"]["name"] == "labs-wile"
    assert objects.pod["metadata"]["namespace"] == "labs-wile"
    assert internal_url(config, "wile") == "http://nb-wile-lab.labs-wile:8888"


def test_creation_order(full_config: Config, minimal_config: Config) -> None:
    kinds = [o["kind"] for _, o in _build(full_config).in_creation_order()]
    assert kinds[0] == "Namespace"
    assert kinds[-1] == "Pod"
    assert kinds.index("ResourceQuota") < kinds.index("Pod")
    assert len(kinds) == 9
    minimal = [p for p, _ in _build(minimal_config).in_creation_order()]
    assert minimal == [
        "namespaces",
        "resourcequotas",
        "networkpolicies",
        "configmaps",
        "configmaps",
        "secrets",
        "services",
        "pods",
    ]


def test_argo_cd_and_ownership_metadata_on_every_object(full_config: Config) -> None:
    for obj in _build(full_config).all():
        meta = obj["metadata"]
        assert meta["labels"]["argocd.argoproj.io/instance"] == "nublado-users"
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "lab-spawner"
        assert meta["labels"]["lab-spawner.jupyter.org/user"] == "wile"
        assert meta["annotations"]["argocd.argoproj.io/compare-options"] == "IgnoreExtraneous"
        assert meta["annotations"]["argocd.argoproj.io/sync-options"] == "Prune=false"
        has_spec = obj["kind"] in ("Namespace", "Pod")
        assert (SPEC_ANNOTATION in meta["annotations"]) == has_spec


def test_spec_annotation_round_trips(full_config: Config) -> None:
    objects = _build(full_config, debug=True, env={"JUPYTERHUB_USER": "wile", "X": "y"})
    spec = make_spec(full_config, WILE, debug=True, env={"JUPYTERHUB_USER": "wile", "X": "y"})
    text = objects.pod["metadata"]["annotations"][SPEC_ANNOTATION]
    assert text == objects.namespace["metadata"]["annotations"][SPEC_ANNOTATION]
    rebuilt = spec_from_annotation(text)
    assert rebuilt == dataclasses.replace(spec, user=dataclasses.replace(WILE, email=None))
    record = lab_record(spec)
    assert record["quotas"] == quotas(spec.size)
    assert record["image"] == {
        "reference": spec.image.reference,
        "digest": spec.image.digest,
        "description": "Weekly 2024_42",
    }
    assert record["size"] == "medium"
    assert record["options"]["debug"] is True


@pytest.mark.parametrize("text", ["not json", '{"version": 99}', '{"version": 1}'])
def test_unreadable_spec_annotation(text: str) -> None:
    with pytest.raises(ValueError, match="spec annotation"):
        spec_from_annotation(text)


def test_service_and_internal_url(full_config: Config) -> None:
    service = _build(full_config).service
    assert service["metadata"]["name"] == "nb-wile-lab"
    assert service["spec"] == {
        "type": "ClusterIP",
        "selector": {
            "lab-spawner.jupyter.org/user": "wile",
            "app.kubernetes.io/component": "lab",
        },
        "ports": [{"name": "lab", "port": 8899, "targetPort": 8899, "protocol": "TCP"}],
    }
    pod_labels = _build(full_config).pod["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert internal_url(full_config, "wile") == "http://nb-wile-lab.nublado-wile:8899"


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        (
            "http://{service}.{namespace}.svc.cluster.local:{port}",
            "http://nb-wile-lab.labs-wile.svc.cluster.local:8899",
        ),
        ("https://{username}.labs.example:443", "https://wile.labs.example:443"),
        ("http://127.0.0.1:5123", "http://127.0.0.1:5123"),
    ],
)
def test_internal_url_follows_the_configured_template(template: str, expected: str) -> None:
    config = dataclasses.replace(
        make_config(port=8899, internalUrl=template), namespace_prefix="labs"
    )
    assert config.lab.internal_url == template
    assert internal_url(config, "wile") == expected


def test_internal_url_naming_the_cluster_ip_waits_for_the_services_address() -> None:
    config = make_config(internalUrl="http://{cluster_ip}:{port}")
    assert internal_url(config, "wile") is None
    assert internal_url(config, "wile", cluster_ip="10.96.7.7") == "http://10.96.7.7:8888"
    assert service_address({"spec": {"clusterIP": "10.96.7.7"}}) == "10.96.7.7"
    # A headless Service, or none at all, has no address to give.
    assert service_address({"spec": {"clusterIP": "None"}}) == ""
    assert service_address(None) == ""


def test_status_record_holds_no_credentials_and_the_url_it_is_given() -> None:
    config = make_config()
    spec = make_spec(config, WILE, env={"JUPYTERHUB_API_TOKEN": "secret", "TZ": "UTC"})
    running = status_record(
        spec, config, status=WorkloadStatus.RUNNING, pod=PodState.PRESENT, url="http://10.0.0.1:1"
    )
    assert running.internal_url == "http://10.0.0.1:1"
    assert running.env == {"TZ": "UTC"}


def test_network_policy(full_config: Config) -> None:
    objects = _build(full_config)
    policy = objects.network_policy
    assert policy is not None
    assert policy["apiVersion"] == "networking.k8s.io/v1"
    assert policy["spec"] == {
        "podSelector": {
            "matchLabels": {
                "lab-spawner.jupyter.org/user": "wile",
                "app.kubernetes.io/component": "lab",
            }
        },
        "policyTypes": ["Ingress"],
        "ingress": [
            {
                "from": [
                    {"podSelector": {}},
                    {
                        "namespaceSelector": {
                            "matchLabels": {"kubernetes.io/metadata.name": "nublado"}
                        }
                    },
                    {
                        "namespaceSelector": {
                            "matchLabels": {"kubernetes.io/metadata.name": "jupyterhub"}
                        }
                    },
                ]
            }
        ],
    }
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert selector.items() <= objects.pod["metadata"]["labels"].items()


def test_network_policy_disabled() -> None:
    config = make_config(networkPolicy={"enabled": False})
    objects = _build(config)
    assert objects.network_policy is None
    assert "networkpolicies" not in [p for p, _ in objects.in_creation_order()]


def test_resource_quota_and_quotas(full_config: Config) -> None:
    objects = _build(full_config, size="medium")
    assert objects.resource_quota["spec"] == {
        "hard": {
            "limits.cpu": "2",
            "limits.memory": "8Gi",
            "requests.cpu": "500m",
            "requests.memory": "2Gi",
        }
    }
    size = full_config.lab.size("small")
    assert size is not None
    assert quotas(size) == {
        "limits": {"cpu": 1.0, "memory": 4 * 2**30},
        "requests": {"cpu": 0.25, "memory": 2**30},
    }


def test_pod_fits_its_quota_exactly(full_config: Config) -> None:
    objects = _build(full_config)
    hard = objects.resource_quota["spec"]["hard"]
    spec = objects.pod["spec"]
    for container in spec["containers"] + spec["initContainers"]:
        resources = container["resources"]
        assert resources["limits"] == {"cpu": hard["limits.cpu"], "memory": hard["limits.memory"]}
        assert resources["requests"] == {
            "cpu": hard["requests.cpu"],
            "memory": hard["requests.memory"],
        }


def test_output_is_deterministic(full_config: Config) -> None:
    assert _build(full_config) == _build(full_config)
