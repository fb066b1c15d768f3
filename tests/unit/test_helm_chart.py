"""The Helm chart renders, with Helm itself, into manifests Kubernetes accepts and checkov passes,
for the default values and every value set of deploy/helm/values/ (docs/kubernetes.md)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def _validate_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("layby_chart_validate", ROOT / "deploy/helm/validate.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


validate = _validate_module()
SETS: dict[str, dict[str, Any]] = validate.value_sets()


def _objects(values: dict[str, Any], chart: Path | None = None) -> list[tuple[str, dict[str, Any]]]:
    return list(validate.manifests(validate.render(values, chart or validate.CHART)))


@pytest.mark.parametrize("name", sorted(SETS))
def test_each_value_set_lints_renders_and_is_valid_kubernetes(name: str) -> None:
    """helm lint --strict finds nothing and every rendered object is valid for Kubernetes in strict mode."""
    assert validate.lint(SETS[name]) == []
    objects = _objects(SETS[name])
    assert objects
    assert validate.kube_errors(objects) == []


@pytest.mark.parametrize("name", sorted(SETS))
def test_no_secret_is_rendered_and_every_secret_setting_is_a_reference(name: str) -> None:
    """The chart renders no Secret; the DSN, tokens, sealing key and NATS seeds come only from secretKeyRef."""
    objects = _objects(SETS[name])
    assert [obj["kind"] for _, obj in objects if obj["kind"] == "Secret"] == []
    secret_vars = {"LAYBY_DATABASE_URL", "LAYBY_API_TOKENS", "LAYBY_SECRETS_KEY", "LAYBY_NATS_SEED"}
    for _, obj in objects:
        if obj["kind"] == "ConfigMap":
            assert secret_vars.isdisjoint(obj["data"])
        for container in obj.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            for env in container.get("env", []):
                if env["name"] in secret_vars:
                    assert set(env) == {"name", "valueFrom"}
                    assert "secretKeyRef" in env["valueFrom"]


def test_every_service_is_probed_where_it_answers() -> None:
    """The door is probed on its HTTP port, the other four on LAYBY_HEALTH_PORT (the port named
    ``metrics``); liveness asks /healthz and readiness /readyz."""
    deployments = {
        obj["metadata"]["name"]: obj["spec"]["template"]["spec"]["containers"][0]
        for _, obj in _objects({})
        if obj["kind"] == "Deployment"
    }
    assert sorted(deployments) == [f"layby-{s}" for s in ("ask", "delivery", "door", "resume", "sweeper")]
    for name, container in deployments.items():
        port = "http" if name == "layby-door" else "metrics"
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port}
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port}
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["LAYBY_HEALTH_PORT"] == "8081"


def test_a_broken_template_fails_validation(tmp_path: Path) -> None:
    """A misspelt field in a template is an error naming it, not a manifest Kubernetes would drop."""
    chart = tmp_path / "layby"
    shutil.copytree(validate.CHART, chart)
    service = chart / "templates/service.yaml"
    service.write_text(service.read_text().replace("targetPort: http", "targetPrt: http"))
    errors = validate.kube_errors(_objects({}, chart))
    assert errors == [
        "layby/templates/service.yaml Service/layby-door: "
        "Additional properties are not allowed ('targetPrt' was unexpected)"
    ]


def test_values_the_schema_refuses_do_not_render() -> None:
    """values.schema.json refuses a secret given as a value instead of a reference to a Secret."""
    with pytest.raises(validate.helm.HelmError, match="apiToken"):
        validate.render({"secrets": {"apiToken": "a-token-in-values"}})


def test_checkov_finds_nothing_but_the_skips_it_gives_reasons_for() -> None:
    """checkov reports no failed check over every value set's manifests; each skip has a reason."""
    checkov = validate.find_checkov()
    if checkov is None:
        if os.environ.get("CI") == "true":
            pytest.fail("checkov is missing: .ci/run installs it into .ci/.checkov")
        pytest.skip("checkov is not installed (.ci/run installs it into .ci/.checkov)")
    assert all(why.strip() for why in validate.load_skips().values())
    rendered = {name: validate.render(values) for name, values in SETS.items()}
    assert validate.checkov_failures(rendered, checkov) == []


def _deployments(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {obj["metadata"]["name"]: obj for _, obj in _objects(values) if obj["kind"] == "Deployment"}


def test_every_pod_serves_metrics_on_a_port_named_metrics_with_scrape_annotations() -> None:
    """Each of the five pods names its side port ``metrics`` (LAYBY_HEALTH_PORT) and carries the
    prometheus.io annotations for it; the door's Service exposes only its HTTP port
    (docs/observability.md#where-metrics-are-served)."""
    for name, deployment in _deployments({}).items():
        pod = deployment["spec"]["template"]
        [container] = pod["spec"]["containers"]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports["metrics"] == 8081, name
        assert set(ports) == ({"http", "metrics"} if name == "layby-door" else {"metrics"})
        annotations = pod["metadata"]["annotations"]
        assert (annotations["prometheus.io/scrape"], annotations["prometheus.io/port"]) == ("true", "8081")
        assert annotations["prometheus.io/path"] == "/metrics"
    [door] = [obj for _, obj in _objects({}) if obj["kind"] == "Service"]
    assert [p["targetPort"] for p in door["spec"]["ports"]] == ["http"]


def test_a_service_monitor_is_rendered_only_when_enabled_and_selects_the_metrics_port() -> None:
    """metrics.serviceMonitor.enabled (default false) adds a ServiceMonitor and the headless
    Service of every pod's metrics port it selects."""
    assert [obj for _, obj in _objects({}) if obj["kind"] == "ServiceMonitor"] == []
    objects = _objects({"metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}}})
    assert validate.kube_errors(objects) == []
    [monitor] = [obj for _, obj in objects if obj["kind"] == "ServiceMonitor"]
    [service] = [obj for _, obj in objects if obj["metadata"]["name"] == "layby-metrics"]
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["endpoints"] == [
        {"port": "metrics", "path": "/metrics", "interval": "30s", "scrapeTimeout": "10s"}
    ]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["ports"] == [
        {"name": "metrics", "port": 8081, "targetPort": "metrics", "protocol": "TCP"}
    ]


def test_a_misspelt_service_monitor_field_fails_validation() -> None:
    """The ServiceMonitor, a custom resource, is checked as strictly as Kubernetes' own kinds."""
    objects = _objects({"metrics": {"serviceMonitor": {"enabled": True}}})
    [monitor] = [obj for _, obj in objects if obj["kind"] == "ServiceMonitor"]
    monitor["spec"]["endpoints"][0]["intervl"] = "5s"
    errors = validate.kube_errors([("servicemonitor.yaml", monitor)])
    assert errors == [
        "servicemonitor.yaml ServiceMonitor/layby: Additional properties are not allowed ('intervl' was unexpected)"
    ]


def test_the_metrics_port_is_admitted_only_from_the_monitoring_namespace() -> None:
    """With network policies on, every pod's metrics port accepts connections from metrics.from
    (by default the ``monitoring`` namespace) and nothing else does."""
    policies = {obj["metadata"]["name"]: obj for _, obj in _objects({}) if obj["kind"] == "NetworkPolicy"}
    [rule] = policies["layby-metrics-ingress"]["spec"]["ingress"]
    assert rule == {
        "ports": [{"protocol": "TCP", "port": 8081}],
        "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
    }
    assert "component" not in str(policies["layby-metrics-ingress"]["spec"]["podSelector"])  # every pod
    [door_rule] = policies["layby-door-ingress"]["spec"]["ingress"]
    assert door_rule["ports"] == [{"protocol": "TCP", "port": 8000}]
    nobody = _objects({"metrics": {"from": []}})
    assert "layby-metrics-ingress" not in {obj["metadata"]["name"] for _, obj in nobody}


def test_consumer_lag_scales_on_the_services_own_consumer_backlog() -> None:
    """consumerLag adds an External metric on layby_consumer_pending for the service's consumer
    (the door's projector by default), with a target per pod (docs/kubernetes.md#autoscaling)."""
    lag = {"enabled": True, "targetAverageValue": "30"}
    values = {"components": {"door": {"autoscaling": {"consumerLag": lag}}}}
    hpas = {
        obj["metadata"]["name"]: obj
        for _, obj in _objects(values)
        if obj["kind"] == "HorizontalPodAutoscaler"
    }
    [external] = [m for m in hpas["layby-door"]["spec"]["metrics"] if m["type"] == "External"]
    assert external["external"] == {
        "metric": {"name": "layby_consumer_pending", "selector": {"matchLabels": {"consumer": "projector"}}},
        "target": {"type": "AverageValue", "averageValue": "30"},
    }
    assert all(m["type"] == "Resource" for m in hpas["layby-resume"]["spec"]["metrics"])


@pytest.mark.parametrize("service", ["ask", "sweeper"])
def test_consumer_lag_on_a_service_without_a_consumer_is_refused(service: str) -> None:
    """The ask and sweeper services read no consumer: scaling them on a backlog is a values error."""
    values = {"components": {service: {"autoscaling": {"consumerLag": {"enabled": True}}}}}
    with pytest.raises(validate.helm.HelmError, match=f"the {service} service has no consumer to scale on"):
        validate.render(values)


def test_the_metrics_port_must_differ_from_the_doors_port() -> None:
    """healthPort equal to door.port would put /metrics on the public port: refused."""
    with pytest.raises(validate.helm.HelmError, match=r"healthPort must differ from door\.port"):
        validate.render({"healthPort": 8000})
