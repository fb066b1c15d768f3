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
    """The door is probed on its HTTP port, the other four on LAYBY_HEALTH_PORT; liveness asks
    /healthz and readiness /readyz."""
    deployments = {
        obj["metadata"]["name"]: obj["spec"]["template"]["spec"]["containers"][0]
        for _, obj in _objects({})
        if obj["kind"] == "Deployment"
    }
    assert sorted(deployments) == [f"layby-{s}" for s in ("ask", "delivery", "door", "resume", "sweeper")]
    for name, container in deployments.items():
        port = "http" if name == "layby-door" else "health"
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port}
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port}
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert ("LAYBY_HEALTH_PORT" in env) is (name != "layby-door")


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
