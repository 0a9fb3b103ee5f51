"""Configuration loading: every error names the key path and the problem."""

from __future__ import annotations

import dataclasses
import importlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.config import Config, ConfigError, default_config_path, load_config, parse_config
from app.config.schema import ConfigSchema
from app.workloads.config_sections import KIND_SECTIONS
from app.workloads.fileserver.config import FileserverConfig

REPO = Path(__file__).resolve().parent.parent

LAB = {"sizes": [{"name": "small", "cpu": 1, "memory": "4Gi"}]}
PREPULL = [
    {
        "name": "fixed",
        "type": "simple",
        "images": [{"url": "registry.example/lab:w_2024_42", "name": "Weekly 2024_42"}],
    }
]
MINIMAL = {"gafaelfawr": {"url": "http://gafaelfawr.example:8080/"}, "prepull": PREPULL, "lab": LAB}


def _problems(raw: object) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(raw, "test.yaml")
    return info.value.problems


def test_bundled_demo_config_loads() -> None:
    config = load_config(default_config_path())
    assert config.gafaelfawr.url.startswith("http://127.0.0.1:")
    assert config.kubernetes.mode == "host"


def test_defaults_fill_everything_but_gafaelfawr() -> None:
    config = parse_config(MINIMAL)
    assert config.gafaelfawr.url == "http://gafaelfawr.example:8080"
    assert config.redis.socket_timeout == 2.0
    assert config.gafaelfawr.timeout == 3.0
    assert config.kubernetes.request_timeout == 10.0
    assert config.namespace_prefix == "nublado"


def test_the_root_is_composed_of_every_kinds_sections() -> None:
    """A kind's sections are declared in its package's ``config.py`` and listed once; one
    left out of the list would be refused as an unknown key, and the root names every part
    of ``Config``."""
    packages = sorted(p.parent.name for p in (REPO / "app" / "workloads").glob("*/config.py"))
    declared = {
        name
        for package in packages
        for name in importlib.import_module(f"app.workloads.{package}.config").SECTIONS
    }
    listed = {name for sections in KIND_SECTIONS for name in sections}
    assert (
        declared
        == listed
        == {
            "apps",
            "clusters",
            "fileserver",
            "images",
            "lab",
            "prepull",
            "prepuller",
        }
    )
    # A kind that keeps its section's model in its package is held in ``sections``.
    own = {field.name for field in dataclasses.fields(Config)} - {"sections"}
    assert set(ConfigSchema().fields) == own | {"fileserver"}
    assert isinstance(parse_config(MINIMAL).sections["fileserver"], FileserverConfig)


def test_unknown_top_level_key_is_named() -> None:
    assert _problems({**MINIMAL, "gafaelfwar": {}}) == ["gafaelfwar: Unknown field."]


def test_unknown_nested_key_is_named_with_its_path() -> None:
    raw = {**MINIMAL, "gafaelfawr": {"url": "http://g.example", "cacheSecond": 3}}
    assert _problems(raw) == ["gafaelfawr.cacheSecond: Unknown field."]


def test_wrong_types_and_values_are_each_reported() -> None:
    raw = {
        **MINIMAL,
        "redis": {"socketTimeout": "soon"},
        "kubernetes": {"mode": "magic", "requestTimeout": -1},
        "namespacePrefix": "Not_A_Label",
    }
    problems = _problems(raw)
    assert "redis.socketTimeout: Not a valid number." in problems
    assert any(p.startswith("kubernetes.mode: Must be one of") for p in problems)
    assert any(p.startswith("kubernetes.requestTimeout: Must be greater than 0") for p in problems)
    assert any(p.startswith("namespacePrefix: must be a DNS label") for p in problems)
    assert len(problems) == 4


def test_missing_required_keys() -> None:
    assert _problems({}) == [
        "gafaelfawr: Missing data for required field.",
        "lab: Missing data for required field.",
        "prepull: Missing data for required field.",
    ]


def test_top_level_must_be_a_mapping() -> None:
    assert _problems(["a", "list"]) == ["(top level): must be a mapping of keys to values"]


def test_invalid_yaml_names_the_position(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("gafaelfawr:\n  url: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(path) in str(info.value)
    assert info.value.problems[0].startswith("line 3, column 1: not valid YAML")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "absent.yaml")
    assert "cannot be read" in info.value.problems[0]


def test_path_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({**MINIMAL, "gafaelfawr": {"url": "http://from-env.example"}}))
    monkeypatch.setenv("SPAWNER_CONFIG_PATH", str(path))
    assert load_config().gafaelfawr.url == "http://from-env.example"


def test_redis_url_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPAWNER_REDIS_URL", "redis://elsewhere.example:6380/2")
    assert parse_config(MINIMAL).redis.url == "redis://elsewhere.example:6380/2"


SENTINEL = {"addresses": ["sentinel-0.redis:26379", "[fd00::1]:26380"], "serviceName": "lab"}


def test_redis_through_sentinel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPAWNER_REDIS_URL", raising=False)
    monkeypatch.setenv("SPAWNER_REDIS_PASSWORD", "server-secret")
    monkeypatch.setenv("SPAWNER_REDIS_SENTINEL_PASSWORD", "sentinel-secret")
    redis = parse_config({**MINIMAL, "redis": {"sentinel": {**SENTINEL, "db": 2}}}).redis
    assert redis.url is None and redis.sentinel is not None
    assert redis.sentinel.addresses == (("sentinel-0.redis", 26379), ("fd00::1", 26380))
    assert (redis.sentinel.service_name, redis.sentinel.db) == ("lab", 2)
    # Passwords come from the environment only, and never show in a log line.
    assert redis.password == "server-secret"
    assert redis.sentinel.sentinel_password == "sentinel-secret"
    assert "secret" not in repr(redis)


def test_redis_defaults_to_a_local_url_and_sentinel_is_optional(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SPAWNER_REDIS_URL", raising=False)
    monkeypatch.delenv("SPAWNER_REDIS_PASSWORD", raising=False)
    redis = parse_config(MINIMAL).redis
    assert (redis.url, redis.sentinel, redis.password) == ("redis://127.0.0.1:6379/0", None, None)
    sentinel = parse_config({**MINIMAL, "redis": {"sentinel": SENTINEL}}).redis.sentinel
    assert sentinel is not None and sentinel.sentinel_password is None


def test_redis_url_from_environment_replaces_sentinel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPAWNER_REDIS_URL", "redis://elsewhere.example:6380/2")
    redis = parse_config({**MINIMAL, "redis": {"sentinel": SENTINEL}}).redis
    assert (redis.url, redis.sentinel) == ("redis://elsewhere.example:6380/2", None)


def test_redis_sentinel_problems_are_reported() -> None:
    both = {"url": "redis://r:6379/0", "sentinel": SENTINEL}
    assert _problems({**MINIMAL, "redis": both}) == [
        "redis.sentinel: give either url (one Redis server) or sentinel (Redis Sentinel), not both"
    ]
    bad = {"addresses": ["sentinel", "s:99999", "s:26379"], "password": "x"}
    problems = _problems({**MINIMAL, "redis": {"sentinel": bad}})
    assert problems == [
        "redis.sentinel.addresses[0]: 'sentinel' is not host:port, e.g. redis-sentinel:26379",
        "redis.sentinel.addresses[1]: 's:99999' is not host:port, e.g. redis-sentinel:26379",
        "redis.sentinel.password: Unknown field.",
    ]
    assert _problems({**MINIMAL, "redis": {"sentinel": {"addresses": []}}}) == [
        "redis.sentinel.addresses: Shorter than minimum length 1."
    ]


def test_bad_config_stops_wsgi_start_with_message_not_traceback(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("gafaelfawr:\n  url: 12\nlogLevel: LOUD\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-c", "import wsgi"],
        cwd=REPO,
        env={"SPAWNER_CONFIG_PATH": str(path), "PATH": ""},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "gafaelfawr.url: Not a valid URL." in result.stderr
    assert "logLevel: Must be one of" in result.stderr


def test_lab_sizes_quantities_and_default_requests() -> None:
    raw = {
        **MINIMAL,
        "lab": {
            **LAB,
            "sizes": [
                {"name": "small", "cpu": "500m", "memory": "2Gi"},
                {"name": "big", "cpu": 4, "memory": "16Gi", "requests": {"cpu": 2}},
            ],
        },
    }
    small, big = parse_config(raw).lab.sizes
    assert (small.cpu, small.memory) == (0.5, 2 * 2**30)
    assert (small.cpu_request, small.memory_request) == (0.125, 2**29)
    assert (big.cpu_request, big.memory_request) == (2.0, 4 * 2**30)


def test_lab_errors_name_the_list_entry() -> None:
    raw = {
        **MINIMAL,
        "lab": {
            **LAB,
            "sizes": [
                {"name": "huge", "cpu": "lots", "memory": "1Gi", "requests": {"memory": "2Gi"}}
            ],
            "volumes": [{"name": "home", "type": "nfs", "path": "/export"}],
            "volumeMounts": [{"volumeName": "scratch", "mountPath": "/scratch"}],
            "env": {"BAD-NAME": "x"},
        },
    }
    problems = _problems(raw)
    assert "lab.sizes[0].cpu: not a CPU quantity (examples: 2, 0.5, 500m)" in problems
    assert "lab.volumes[0].server: required for type nfs" in problems
    assert any(p.startswith("lab.env.BAD-NAME") for p in problems)


def test_lab_mounts_must_name_configured_volumes() -> None:
    raw = {
        **MINIMAL,
        "lab": {**LAB, "volumeMounts": [{"volumeName": "scratch", "mountPath": "/scratch"}]},
    }
    assert _problems(raw) == ["lab.volumeMounts: mount refers to unknown volume 'scratch'"]


def test_lab_requests_may_not_exceed_limits() -> None:
    raw = {
        **MINIMAL,
        "lab": {
            **LAB,
            "sizes": [{"name": "s", "cpu": 1, "memory": "1Gi", "requests": {"memory": "2Gi"}}],
        },
    }
    assert _problems(raw) == ["lab.sizes[0].requests.memory: must not exceed memory"]


def test_validating_the_config_imports_no_network_library() -> None:
    # gunicorn's arbiter validates the config before forking; the gevent workers patch the
    # standard library afterwards, so these must not be imported by then.
    code = (
        "import sys, app.config; "
        "print(sorted(m for m in ('flask', 'requests', 'urllib3', 'redis', 'kubernetes', 'ssl')"
        " if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


RUBIN = {
    "name": "jupyter",
    "type": "rubin",
    "registry": "registry.hub.docker.com",
    "docker": {"repository": "lsstsqre/sciplat-lab"},
    "recommendedTag": "recommended",
    "numReleases": 1,
    "numWeeklies": 2,
    "numDailies": 3,
}


def test_dmtn_222_prepull_examples_load() -> None:
    gar = {
        "name": "gar",
        "type": "rubin-gar",
        "gar": {
            "repository": "sciplat",
            "image": "sciplat-lab",
            "projectId": "rubin-shared-services-71ec",
            "location": "us-central1",
        },
        "recommendedTag": "recommended",
    }
    cycle = {
        **RUBIN,
        "name": "telescope",
        "registry": "ts-dockerhub.lsst.org",
        "docker": {"repository": "sal-sciplat-lab"},
        "recommendedTag": "recommended_c0026",
        "numReleases": 0,
        "cycle": 26,
        "aliasTags": ["latest", "latest_daily", "latest_weekly"],
    }
    config = parse_config({**MINIMAL, "prepull": [RUBIN, gar, cycle, *PREPULL]})
    jupyter, google, telescope, fixed = config.prepull
    assert jupyter.source == "registry.hub.docker.com/lsstsqre/sciplat-lab"
    assert (jupyter.num_releases, jupyter.num_weeklies, jupyter.num_dailies) == (1, 2, 3)
    assert google.source == (
        "us-central1-docker.pkg.dev/rubin-shared-services-71ec/sciplat/sciplat-lab"
    )
    assert telescope.cycle == 26 and telescope.alias_tags == (
        "latest",
        "latest_daily",
        "latest_weekly",
    )
    assert (
        fixed.images[0].url == "registry.example/lab:w_2024_42" and fixed.images[0].digest is None
    )
    # What the prepull status route reports: the block as written, camelCase.
    assert telescope.document["recommendedTag"] == "recommended_c0026"
    assert google.document["gar"]["projectId"] == "rubin-shared-services-71ec"


@pytest.mark.parametrize(
    ("block", "problem"),
    [
        ({**RUBIN, "registry": None}, "prepull[0].registry: required for type rubin"),
        (
            {k: v for k, v in RUBIN.items() if k != "docker"},
            "prepull[0].docker: required for type rubin",
        ),
        ({**RUBIN, "type": "quay"}, "prepull[0].type: Must be one of: rubin, rubin-gar, simple."),
        (
            {**RUBIN, "numWeeklies": -1},
            "prepull[0].numWeeklies: Must be greater than or equal to 0",
        ),
        ({**RUBIN, "recommendedTag": "bad tag"}, "prepull[0].recommendedTag: must be an image tag"),
        ({**RUBIN, "registry": "https://hub"}, "prepull[0].registry: must be a registry host"),
        (
            {**RUBIN, "docker": {"repository": "Upper/Case"}},
            "prepull[0].docker.repository: must be",
        ),
        ({**RUBIN, "images": []}, "prepull[0].images: not used by type rubin"),
        (
            {**RUBIN, "gar": {"repository": "r", "image": "i", "projectId": "p", "location": "l"}},
            "prepull[0].gar: not used by type rubin",
        ),
        ({"name": "s", "type": "simple"}, "prepull[0].images: required for type simple"),
        ({**PREPULL[0], "numReleases": 1}, "prepull[0].numReleases: not used by type simple"),
        (
            {"name": "s", "type": "simple", "images": [{"url": "lab:1", "name": "x"}]},
            "prepull[0].images[0].url: must be <registry>/<repository>:<tag>",
        ),
        (
            {
                "name": "s",
                "type": "simple",
                "images": [{"url": "r.io/a:1", "name": "x", "digest": "md5:1"}],
            },
            "prepull[0].images[0].digest: must be sha256:<64 hex digits>",
        ),
        ({**RUBIN, "colour": "blue"}, "prepull[0].colour: Unknown field."),
    ],
)
def test_bad_prepull_blocks_name_the_key(block: dict[str, object], problem: str) -> None:
    problems = _problems({**MINIMAL, "prepull": [block]})
    assert any(p.startswith(problem) for p in problems), problems


def test_prepull_names_are_unique_and_one_block_is_needed() -> None:
    assert _problems({**MINIMAL, "prepull": [RUBIN, RUBIN]}) == [
        "prepull: duplicate names: jupyter"
    ]
    assert _problems({**MINIMAL, "prepull": []}) == ["prepull: Shorter than minimum length 1."]
    # The names are the prepull section's own rule, reported beside other sections' problems.
    assert _problems({**MINIMAL, "prepull": [RUBIN, RUBIN], "namespacePrefix": "No"}) == [
        "namespacePrefix: must be a DNS label: lowercase letters, digits and '-'",
        "prepull: duplicate names: jupyter",
    ]


def test_images_section_and_size_groups() -> None:
    raw = {
        **MINIMAL,
        "images": {
            "refreshSeconds": 120,
            "credentialsSecret": "pull-credentials",
            "insecureRegistries": ["localhost:5000"],
        },
        "lab": {"sizes": [{"name": "gpu", "cpu": 2, "memory": "8Gi", "groups": ["science"]}]},
    }
    config = parse_config(raw)
    assert config.images.refresh_seconds == 120
    assert config.images.credentials_secret == "pull-credentials"
    assert config.images.insecure_registries == ("localhost:5000",)
    assert config.lab.sizes[0].groups == ("science",)
    bad = {**raw, "images": {"insecureRegistries": ["http://localhost:5000"]}}
    assert _problems(bad)[0].startswith("images.insecureRegistries[0]: must be a registry host")


def test_lab_internal_url_defaults_to_the_services_short_dns_name() -> None:
    assert parse_config(MINIMAL).lab.internal_url == "http://{service}.{namespace}:{port}"


@pytest.mark.parametrize(
    "template",
    [
        "http://{service}.{namespace}.svc.cluster.local:{port}",
        "https://labs.example.org:8443/",
        "http://127.0.0.1:8888",
        "http://[::1]:{port}",
        "http://lab-{username}.proxy.example",
    ],
)
def test_lab_internal_url_accepts_templates_giving_a_base_url(template: str) -> None:
    raw = {**MINIMAL, "lab": {**LAB, "internalUrl": template}}
    assert parse_config(raw).lab.internal_url == template


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("http://{user}.{namespace}:{port}", "unknown placeholder {user}; placeholders are"),
        ("http://{0}:{port}", "unknown placeholder {0}"),
        ("http://{service.name}:{port}", "unknown placeholder {service.name}"),
        ("http://{service}:{port:05d}", "placeholder {port:05d} must be written plainly"),
        ("http://{service!r}:{port}", "placeholder {service!r} must be written plainly"),
        ("http://{service:{port}", "not a valid template"),
        ("http://{service}}:{port}", "not a valid template (Single '}'"),
        ("{service}.{namespace}:{port}", "must give an absolute http or https URL"),
        ("ftp://{service}.{namespace}", "must give an absolute http or https URL"),
        ("http://:{port}", "must give an absolute http or https URL with a host"),
        ("http://{service}:{username}", "must give an absolute http or https URL"),
        ("http://{service}:70000", "must give an absolute http or https URL"),
        ("http://{service}:0", "must give a port from 1 to 65535"),
        ("http://{service}.{namespace}:{port}/lab", "must give only scheme, host and port"),
        ("http://{service}:{port}?user={username}", "must give only scheme, host and port"),
        ("http://hub:secret@{service}:{port}", "must not carry credentials"),
        ("http://{service} {namespace}:{port}", "must give a host that is a DNS name"),
    ],
)
def test_lab_internal_url_rejects_bad_templates(template: str, problem: str) -> None:
    problems = _problems({**MINIMAL, "lab": {**LAB, "internalUrl": template}})
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"lab.internalUrl: {problem}"), problems


def test_lab_internal_url_problem_shows_what_the_template_gives() -> None:
    (problem,) = _problems({**MINIMAL, "lab": {**LAB, "internalUrl": "{service}:{port}"}})
    assert "'nb-someone-lab:8888'" in problem


def test_clusters_and_budgets_have_working_defaults() -> None:
    config = parse_config(MINIMAL)
    clusters = config.clusters
    assert clusters.kinds == ("daskclusters", "rayclusters", "sparkclusters")
    (tier,) = clusters.tiers
    assert (tier.name, tier.id, tier.cores, tier.cores_limit) == ("small", "small", 1.0, 2.0)
    assert clusters.default_worker_tier == clusters.default_head_tier == "small"
    assert config.budgets.default.clusters == 1 and config.budgets.groups == ()


def test_tiers_and_group_budgets_are_read() -> None:
    raw = {
        **MINIMAL,
        "clusters": {
            "kinds": ["daskclusters"],
            "tiers": [
                {"name": "small", "cores": "500m", "memory": "2Gi"},
                {
                    "name": "gpu",
                    "id": "t-9",
                    "cores": 4,
                    "memory": "32Gi",
                    "gpus": 1,
                    "nodePool": "gpu",
                    "kinds": ["rayclusters"],
                },
            ],
            "defaultHeadTier": "gpu",
        },
        "budgets": {"groups": [{"group": "g-science", "clusters": 3, "memory": "256Gi"}]},
    }
    config = parse_config(raw)
    small, gpu = config.clusters.tiers
    assert (small.cores, small.cores_limit, small.memory) == (0.5, 0.5, 2 * 2**30)
    assert (gpu.id, gpu.gpus, gpu.node_pool, gpu.kinds) == ("t-9", 1, "gpu", ("rayclusters",))
    assert config.clusters.tier("gpu") == gpu and config.clusters.tier("huge") is None
    assert (config.clusters.default_worker_tier, config.clusters.default_head_tier) == (
        "small",
        "gpu",
    )
    (group,) = config.budgets.groups
    assert group.group == "g-science"
    assert (group.budget.clusters, group.budget.memory, group.budget.workers) == (3, 256 * 2**30, 4)


@pytest.mark.parametrize(
    ("clusters", "problem"),
    [
        (
            {"kinds": ["sparkjobs"]},
            "clusters.kinds[0]: Must be one of: daskclusters, rayclusters, sparkclusters.",
        ),
        ({"tiers": []}, "clusters.tiers: Shorter than minimum length 1."),
        (
            {"tiers": [{"name": "a", "cores": 1, "memory": "1Gi"}] * 2},
            "clusters.tiers: duplicate names: a",
        ),
        (
            {"tiers": [{"name": "a", "cores": 2, "coresLimit": 1, "memory": "1Gi"}]},
            "clusters.tiers[0].coresLimit: must not be less than cores",
        ),
        ({"defaultWorkerTier": "huge"}, "clusters.defaultWorkerTier: not a tier; tiers are: small"),
        (
            {"tiers": [{"name": "a", "id": "gpu a100", "cores": 1, "memory": "1Gi"}]},
            "clusters.tiers[0].id: must be a label value",
        ),
        (
            {"tiers": [{"name": "a", "nodePool": "-gpu", "cores": 1, "memory": "1Gi"}]},
            "clusters.tiers[0].nodePool: must be a label value",
        ),
    ],
)
def test_bad_cluster_settings_are_refused_with_their_key(
    clusters: dict[str, Any], problem: str
) -> None:
    problems = _problems({**MINIMAL, "clusters": clusters})
    assert any(p.startswith(problem) for p in problems), problems


def _lists_in(value: object, path: str) -> list[str]:
    """Where a list is held in the loaded objects (free-form dicts such as an app's pod spec
    are passed as written and not searched)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [
            found
            for field in dataclasses.fields(value)
            for found in _lists_in(getattr(value, field.name), f"{path}.{field.name}")
        ]
    if isinstance(value, tuple):
        return [found for i, item in enumerate(value) for found in _lists_in(item, f"{path}[{i}]")]
    return [path] if isinstance(value, list) else []


def test_every_section_loads_into_frozen_objects_under_the_models_names() -> None:
    toleration = {"key": "pool", "operator": "Exists", "effect": "NoSchedule"}
    template = {
        "name": "notes",
        "version": "1",
        "podTemplate": {"containers": [{"name": "notes", "image": "example/notes:1"}]},
        "servicePorts": [{"name": "http", "port": 80, "targetPort": "web"}],
        "httpPort": 80,
        "defaultEnvs": [{"name": "THEME", "defaultValue": "dark"}],
    }
    raw = {
        **MINIMAL,
        "prepull": [{**RUBIN, "validation": {"command": ["true"], "timeoutSeconds": 60}}],
        "lab": {
            **LAB,
            "volumes": [{"name": "home", "type": "emptyDir"}],
            "initContainers": [
                {
                    "name": "provision",
                    "image": "example/provision:1",
                    "args": ["--home"],
                    "volumeMounts": [{"volumeName": "home", "mountPath": "/home"}],
                }
            ],
            "nodeSelector": {"pool": "labs"},
            "tolerations": [toleration],
        },
        "admission": {"groups": ["g-science"]},
        "admin": {"pod": {"volumes": ["home"], "tolerations": [toleration], "command": ["sh"]}},
        "apps": {
            "templates": [template],
            "quotas": {"groups": [{"group": "g-science", "gpus": 2}]},
        },
        "budgets": {"groups": [{"group": "g-science", "kernels": 9}]},
    }
    config = parse_config(raw)
    assert _lists_in(config, "config") == []
    assert config.lab.tolerations == config.admin.pod.tolerations
    assert config.lab.tolerations[0].toleration_seconds is None
    assert config.lab.node_selector == {"pool": "labs"} and config.admin.pod.node_selector == {}
    (notes,) = config.apps.templates
    assert notes.pod_spec == template["podTemplate"]
    assert [(v.name, v.default) for v in notes.variables] == [("THEME", "dark")]
    assert notes.service_ports[0].target_port == "web"
    (quota,) = config.apps.group_quotas
    assert (quota.group, quota.quota) == (
        "g-science",
        dataclasses.replace(config.apps.default_quota, gpus=2),
    )
    (budget,) = config.budgets.groups
    assert (budget.group, budget.budget) == (
        "g-science",
        dataclasses.replace(config.budgets.default, kernels=9),
    )
    validation = config.prepull[0].validation
    assert validation is not None and (validation.command, validation.timeout) == (("true",), 60.0)
