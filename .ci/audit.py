"""Audit the installed dependency set for known vulnerabilities (pip-audit, PyPI's advisory data).

Fails (exit 1) when any installed distribution has a known vulnerability. Distributions the
advisory service cannot answer for (a private mirror's build, no network) are listed, never
silently counted as safe; when none at all could be audited the summary says so.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

venv_bin = Path(sys.executable).parent
with tempfile.TemporaryDirectory() as tmp:
    report = Path(tmp) / "audit.json"
    run = subprocess.run(  # noqa: S603 - the venv's own pip-audit, fixed arguments
        [
            str(venv_bin / "pip-audit"),
            "--skip-editable",
            "--vulnerability-service",
            "pypi",
            "--progress-spinner",
            "off",
            "--format",
            "json",
            "--output",
            str(report),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if not report.exists():
        print(f"pip-audit did not run: {run.stderr.strip()[-500:]}", file=sys.stderr)
        sys.exit(1)
    deps = json.loads(report.read_text())["dependencies"]

vulnerable = [d for d in deps if d.get("vulns")]
skipped = [d for d in deps if "skip_reason" in d]
audited = len(deps) - len(skipped)
print(
    f"pip-audit: {len(deps)} distributions, {audited} audited, "
    f"{len(skipped)} not auditable, {len(vulnerable)} vulnerable"
)
for d in vulnerable:
    ids = ", ".join(v["id"] for v in d["vulns"])
    print(f"  VULNERABLE {d['name']} {d['version']}: {ids}", file=sys.stderr)
if skipped and audited == 0:
    print("  WARNING: the advisory service answered for none of them; nothing was audited", file=sys.stderr)
sys.exit(1 if vulnerable else 0)
