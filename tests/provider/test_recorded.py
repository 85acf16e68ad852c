"""scripts/down finds the endpoint a stack's clusters were made on in `pulumi stack export`."""

from __future__ import annotations

import json
import subprocess
import sys

from together_clusters.provider.schema import CLUSTER_TYPE


def export(*endpoints: str | None) -> str:
    resources = [{"type": "pulumi:pulumi:Stack", "urn": "s", "outputs": {}}]
    resources += [
        {"type": CLUSTER_TYPE, "urn": f"c{i}", "outputs": {"api_endpoint": e} if e else {}}
        for i, e in enumerate(endpoints)
    ]
    return json.dumps({"version": 3, "deployment": {"resources": resources}})


def recorded(stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "together_clusters.provider.recorded"],
        input=stdin,
        capture_output=True,
        text=True,
    )


def test_the_one_recorded_endpoint_is_printed():
    proc = recorded(export("http://127.0.0.1:4321", "http://127.0.0.1:4321"))
    assert (proc.returncode, proc.stdout.strip()) == (0, "http://127.0.0.1:4321")


def test_a_stack_without_clusters_or_identities_records_none():
    assert recorded("").stdout == "" and recorded(export(None)).stdout == ""


def test_several_endpoints_are_refused():
    proc = recorded(export("https://api.together.ai", "http://127.0.0.1:4321"))
    assert proc.returncode == 2 and "several endpoints" in proc.stderr
