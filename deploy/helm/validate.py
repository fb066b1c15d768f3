"""Render the Helm chart with Helm itself and check what it renders; exit non-zero on any finding.

For the default values and every value set in ``deploy/helm/values/``:

1. the values pass the chart's ``values.schema.json`` and ``helm lint --strict`` finds nothing;
2. Helm (v4, as a library: the ``helm-python-sdk`` wheel, no binary) renders the chart;
3. every manifest is valid for Kubernetes ``KUBE_VERSION`` in strict mode (``kubernetes-validate``:
   unknown fields are errors, as a typo in a template would be); the one custom resource the chart
   can render (prometheus-operator's ServiceMonitor) is checked as strictly against the part of
   its schema the chart uses (``CUSTOM_SCHEMAS``);
4. checkov finds no failed check, apart from the ones ``checkov-skips.yaml`` names with a reason.

Usage: ``python deploy/helm/validate.py [--checkov PATH | --no-checkov]``. checkov lives in a venv
of its own (its pins clash with the project's); ``.ci/run`` makes it at ``.ci/.checkov/``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import jsonschema
import kubernetes_validate
import yaml

HERE = Path(__file__).resolve().parent
CHART = HERE / "layby"
VALUE_SETS = HERE / "values"
SKIPS = HERE / "checkov-skips.yaml"
KUBE_VERSION = "1.35.0"
RELEASE, NAMESPACE = "layby", "layby"

_STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}
_META = {
    "type": "object",
    "required": ["name", "namespace"],
    "additionalProperties": False,
    "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}, "labels": _STRINGS},
}
CUSTOM_SCHEMAS: dict[tuple[str, str], dict[str, Any]] = {
    # monitoring.coreos.com/v1 ServiceMonitor: the fields the chart renders, nothing else allowed.
    ("monitoring.coreos.com/v1", "ServiceMonitor"): {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "additionalProperties": False,
        "properties": {
            "apiVersion": {"const": "monitoring.coreos.com/v1"},
            "kind": {"const": "ServiceMonitor"},
            "metadata": _META,
            "spec": {
                "type": "object",
                "required": ["selector", "endpoints"],
                "additionalProperties": False,
                "properties": {
                    "selector": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {"matchLabels": _STRINGS},
                    },
                    "namespaceSelector": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {"matchNames": {"type": "array", "items": {"type": "string"}}},
                    },
                    "endpoints": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "required": ["port"],
                            "additionalProperties": False,
                            "properties": {
                                "port": {"type": "string"},
                                "path": {"type": "string"},
                                "interval": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h)$"},
                                "scrapeTimeout": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h)$"},
                            },
                        },
                    },
                },
            },
        },
    },
}


def value_sets() -> dict[str, dict[str, Any]]:
    """The defaults (no overrides) and each file of ``deploy/helm/values/``, by name."""
    sets: dict[str, dict[str, Any]] = {"default": {}}
    for path in sorted(VALUE_SETS.glob("*.yaml")):
        sets[path.stem] = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return sets


def render(values: dict[str, Any], chart: Path = CHART) -> dict[str, str]:
    """Template path -> rendered text, as ``helm template`` would (hooks included)."""
    with helm.Chart.load(str(chart)) as loaded:
        loaded.validate_schema(values)
        return loaded.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)


def manifests(rendered: dict[str, str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every Kubernetes object of the rendered chart, with the template it came from."""
    for template, text in sorted(rendered.items()):
        if not template.endswith((".yaml", ".yml")):
            continue  # NOTES.txt
        for doc in yaml.safe_load_all(text):
            if doc:
                yield template, doc


def lint(values: dict[str, Any], chart: Path = CHART) -> list[str]:
    report = helm.lint(str(chart), values, strict=True, namespace=NAMESPACE, kube_version=f"v{KUBE_VERSION}")
    found = [f"{m['path']}: {m['error']}" for m in report.get("messages", []) if m.get("severity", 0) >= 2]
    return found + list(report.get("errors") or [])


def kube_errors(objects: list[tuple[str, dict[str, Any]]]) -> list[str]:
    errors = []
    for template, obj in objects:
        custom = CUSTOM_SCHEMAS.get((obj.get("apiVersion", ""), obj.get("kind", "")))
        try:
            if custom is not None:
                jsonschema.validate(obj, custom)
            else:
                kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
        except (kubernetes_validate.ValidationError, jsonschema.ValidationError) as exc:
            errors.append(f"{template} {obj.get('kind')}/{obj['metadata'].get('name')}: {exc.message}")
    return errors


def load_skips() -> dict[str, str]:
    """Check id -> why it does not apply; a skip without a reason is refused."""
    skips: dict[str, str] = yaml.safe_load(SKIPS.read_text(encoding="utf-8")) or {}
    missing = [check for check, why in skips.items() if not str(why or "").strip()]
    if missing:
        raise SystemExit(f"{SKIPS.name}: every skip needs a reason; none for {', '.join(missing)}")
    return skips


def find_checkov() -> str | None:
    """LAYBY_CHECKOV, else the CI's own venv, else whatever ``checkov`` is on PATH."""
    if os.environ.get("LAYBY_CHECKOV"):
        return os.environ["LAYBY_CHECKOV"]
    ci = HERE.parent.parent / ".ci" / ".checkov" / "bin" / "checkov"
    return str(ci) if ci.exists() else shutil.which("checkov")


def checkov_failures(rendered_sets: dict[str, dict[str, str]], checkov: str) -> list[str]:
    """Run checkov once over every value set's manifests; one line per failed check."""
    skips = load_skips()
    with tempfile.TemporaryDirectory(prefix="layby-chart-") as tmp:
        for name, rendered in rendered_sets.items():
            for template, text in rendered.items():
                if template.endswith(".yaml"):
                    out = Path(tmp, name, template.replace("/", "_"))
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_text(text, encoding="utf-8")
        command = [checkov, "-d", tmp, "--framework", "kubernetes", "--output", "json", "--quiet"]
        command += ["--skip-check", ",".join(skips)] if skips else []
        run = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603
    if run.returncode not in (0, 1) or not run.stdout.strip():
        return [f"checkov did not run (exit {run.returncode}): {run.stderr.strip()[-2000:]}"]
    reports = json.loads(run.stdout)
    failures = []
    for report in reports if isinstance(reports, list) else [reports]:
        for failed in report.get("results", {}).get("failed_checks", []):
            where = failed.get("file_path", "?").lstrip("/")
            failures.append(f"{failed['check_id']} {failed['check_name']} ({where}: {failed['resource']})")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkov", help="checkov to run (default: LAYBY_CHECKOV, .ci/.checkov, PATH)")
    parser.add_argument("--no-checkov", action="store_true", help="render and validate only")
    args = parser.parse_args(argv)
    problems: list[str] = []
    rendered_sets: dict[str, dict[str, str]] = {}
    for name, values in value_sets().items():
        problems += [f"[{name}] lint: {finding}" for finding in lint(values)]
        try:
            rendered_sets[name] = render(values)
        except helm.HelmError as exc:
            problems.append(f"[{name}] render: {exc}")
            continue
        objects = list(manifests(rendered_sets[name]))
        problems += [f"[{name}] {error}" for error in kube_errors(objects)]
        print(f"{name}: {len(objects)} objects rendered, valid for Kubernetes {KUBE_VERSION}")
    if not args.no_checkov:
        checkov = args.checkov or find_checkov()
        if checkov is None:
            problems.append("checkov not found: run .ci/run, set LAYBY_CHECKOV, or pass --no-checkov")
        elif rendered_sets:
            failures = checkov_failures(rendered_sets, checkov)
            problems += [f"checkov: {failure}" for failure in failures]
            if not failures:
                print(f"checkov: no failed checks ({len(load_skips())} skipped with reasons)")
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
