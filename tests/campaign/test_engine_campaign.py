"""The fault campaign's part under the real Pulumi engine: the quickstart stack through the misbehaving
proxy, each step under a seeded fault, the invariants checked against the emulator after every step
from the engine's own exported state (where secrets must be ciphertext), and the work checked as done:
the invariants hold just as well when every `pulumi up` failed, so the campaign also fails unless
``MIN_SUCCESS_SHARE`` of its runs succeeded, and each run that succeeded left what it was asked for."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import _engine
from tests.faultproxy import Fault, FaultProxy
from together_clusters.emulator.server import start_emulator
from together_clusters.provider.client import TogetherClient
from together_clusters.provider.schema import CLUSTER_TYPE

from .invariants import kube_tokens, not_as_asked, violations
from .runner import Results
from .stack import Recorded, Stack

pytestmark = pytest.mark.engine

ROOT = Path(__file__).resolve().parents[2]
KEY = "tgp_v1_engine-campaign-secret-0123456789"
CLUSTERS = "/v1/compute/clusters"
UP = ["up", *_engine.UP_FLAGS]
DESTROY = ["destroy", *_engine.UP_FLAGS]

# (step, fault) pairs an engine sequence draws from; every step runs as a `pulumi` command.
FAULTS = {
    "post-reply-dropped": [Fault("drop", "POST", CLUSTERS)],
    "post-reply-truncated": [Fault("truncate", "POST", CLUSTERS)],
    "500-storm": [Fault("status", "GET", CLUSTERS + "/", status=500, count=3)],
    "429-retry-after-nan": [Fault("status", None, "/v1/", status=429, retry_after="nan", count=3)],
    "reset": [Fault("reset", None, "/v1/", count=2)],
    "put-reply-dropped": [Fault("drop", "PUT", CLUSTERS + "/")],
}
STEPS = ("up", "scale", "refresh-wrong-endpoint", "scale", "destroy")
# What the quickstart program asks for (state field names, as in invariants.OWNED): EngineStack sets it
# as the stack's config, and a scale step changes num_preemptible_gpus.
ASKED = {
    "cluster_name": "quickstart-campaign",
    "region": "us-central-8",
    "gpu_type": "H100_SXM",
    "num_gpus": 8,
    "num_preemptible_gpus": 8,
}
# The campaign fails unless at least this share of its `pulumi up` / `destroy` runs succeeded, the
# fault-free rerun after a failed run included. Faults are injected on purpose and may fail a run (a
# 429 storm while the check lists the regions does), so the share can be below 1 for a healthy product:
# seeds 1-11 measured 100%, but 80% (4 of 5: one faulted run failed, its rerun succeeded) on seeds 3 and
# 4. The floor lets two of the four faulted runs fail (4 of 6, 67%) and no fault-free rerun; a broken
# product is far below it: program or create broken 1 of 7 (14%), update broken 2 of 6 (33%), delete
# broken 3 of 5 (60%, and the closing check finds the cluster left).
MIN_SUCCESS_SHARE = 0.65


class EngineStack:
    def __init__(self, workdir: Path, base_url: str) -> None:
        self.dir = workdir / "project"
        self.dir.mkdir(parents=True)
        pulumi_yaml = re.sub(r"(?m)^main: .*\n", "", (ROOT / "Pulumi.yaml").read_text())
        (self.dir / "Pulumi.yaml").write_text(pulumi_yaml)
        shutil.copy(ROOT / "examples" / "quickstart" / "__main__.py", self.dir / "__main__.py")
        self.env = _engine.engine_env(
            workdir,
            extra={
                "TOGETHER_BASE_URL": base_url,
                "TOGETHER_API_KEY": KEY,
                "TOGETHER_RECONCILE_TIMEOUT_S": "10",
            },
        )
        self.run("stack", "init", "campaign", check=True)
        for key, value in {
            "region": ASKED["region"],
            "gpuType": ASKED["gpu_type"],
            "numGpus": ASKED["num_gpus"],
            "numPreemptibleGpus": ASKED["num_preemptible_gpus"],
        }.items():
            self.run("config", "set", key, str(value), check=True)

    def run(self, *args: str, check: bool = False, env: dict[str, str] | None = None):
        return _engine.run_pulumi(list(args), cwd=self.dir, env={**self.env, **(env or {})}, check=check)

    def export(self) -> dict[str, Any]:
        return json.loads(self.run("stack", "export", check=True).stdout)

    def recorded(self, export: dict[str, Any] | None = None) -> Stack:
        """The engine's state (``export``, or exported now) as the campaign's ``Stack`` (outputs as stored:
        secrets stay ciphertext)."""
        stack = Stack()
        for resource in (self.export() if export is None else export)["deployment"].get("resources") or []:
            if resource["type"] == CLUSTER_TYPE:
                stack.resources[resource["urn"]] = Recorded(
                    resource["id"], resource.get("inputs") or {}, resource.get("outputs") or {}
                )
        return stack


def _clusters_in(export: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Each Cluster's id and plain outputs (secrets are re-encrypted with a new nonce on every save)."""
    return [
        (r["id"], {k: v for k, v in (r.get("outputs") or {}).items() if k != "kube_config"})
        for r in export["deployment"].get("resources") or []
        if r["type"] == CLUSTER_TYPE
    ]


# Diagnostics the engine prints for any failure, or headers of what follows: they say nothing of why.
_SAYS_NOTHING = (
    "error: update failed",
    "error: Resource monitor has terminated",
    "error: Program failed with an unhandled exception:",
    "error: Traceback (most recent call last):",
)


def _errors(proc: subprocess.CompletedProcess[str]) -> str:
    """Why a run failed, in a line for the campaign's report: from the engine's diagnostics, the errors
    and the exception a provider or the program raised, without the generic lines; or the last line."""
    said = proc.stdout + proc.stderr
    lines = [line.strip() for line in said[max(said.find("Diagnostics:"), 0) :].splitlines()]
    why = [
        line
        for line in lines
        if ("error:" in line or re.match(r"\w+(Error|Exception): ", line))
        and not any(line.startswith(generic) for generic in _SAYS_NOTHING)
    ]
    return " | ".join(list(dict.fromkeys(why))[:2] or lines[-1:])


def _left_after_destroy(export: dict[str, Any], live: list[dict[str, Any]]) -> list[str]:
    """What the campaign's closing destroy (or its rerun) left: any resource in the state, any cluster
    still live. Checked whether the destroy succeeded or not: a cluster left running is paid for."""
    state = [f"the state still holds {r['urn']}" for r in export["deployment"].get("resources") or []]
    return state + [f"cluster {c['cluster_id']} ({c['cluster_name']}) is still live" for c in live]


def test_engine_campaign_keeps_every_invariant(tmp_path, campaign_report: Callable[[str], None]) -> None:
    """A seeded sequence of steps, each but the refresh under a fault; a step a fault failed is rerun
    fault-free, as a user would. After each step the invariants hold, and the step, if it succeeded, did
    its work: an up leaves the cluster the program asks for, a destroy leaves nothing."""
    _engine.require_engine()
    seed = int(os.environ.get("CAMPAIGN_SEED", "9"))
    rng = random.Random(f"engine:{seed}")
    results = Results()
    asked = dict(ASKED)
    logs = ""
    with (
        start_emulator(speed=600) as emu,
        start_emulator(speed=600) as elsewhere,
        FaultProxy(emu.base_url) as proxy,
    ):
        stack = EngineStack(tmp_path, proxy.url)

        def run(kind: str, fault: str | None, command: list[str]) -> bool:
            """``pulumi COMMAND`` counted as an operation of ``kind``; whether it succeeded."""
            nonlocal logs
            proc = stack.run(*command)
            proxy.clear()
            logs += proc.stdout + proc.stderr
            results.operations[kind] += 1
            if proc.returncode == 0:
                results.succeeded[kind] += 1
            else:
                results.failures.append(f"{kind} under {fault}: exit {proc.returncode}: {_errors(proc)}")
            return proc.returncode == 0

        def check(where: str, done: str | None) -> None:
            """The invariants; and what step ``done`` must have left: an up or scale that succeeded, the
            cluster asked for; the destroy, nothing."""
            with TogetherClient(api_key=KEY, base_url=emu.base_url) as direct:
                live = [c.model_dump(mode="json") for c in direct.list_clusters() if c.status != "Deleting"]
            export = stack.export()
            state = stack.recorded(export)
            secrets = {KEY} | kube_tokens(live)
            found = violations(state, live, set(), secrets, logs)
            found += ["a secret is in the exported state" for s in secrets if s in json.dumps(export)]
            if done in ("up", "scale"):
                found += not_as_asked(state, live, asked)
            elif done == "destroy":
                found += _left_after_destroy(export, live)
            results.violations.extend(f"{where}: {v}" for v in found)

        for step in STEPS:
            fault = rng.choice(sorted(FAULTS)) if step in ("up", "scale") else None
            if fault is not None:
                results.faults[fault] += 1
                for each in FAULTS[fault]:
                    proxy.add(Fault(**{**each.__dict__}))
            if step == "refresh-wrong-endpoint":
                results.faults[step] += 1
                before = _clusters_in(stack.export())
                proc = stack.run("refresh", *_engine.UP_FLAGS, env={"TOGETHER_BASE_URL": elsewhere.base_url})
                logs += proc.stdout + proc.stderr
                if (
                    proc.returncode == 0
                    or "was created through another API endpoint" not in proc.stdout + proc.stderr
                ):
                    results.violations.append(
                        f"refresh against another endpoint was not refused: {_engine.output(proc)}"
                    )
                if _clusters_in(stack.export()) != before:
                    results.violations.append("refresh against another endpoint changed the state")
                check(f"after {step}", None)
                continue
            if step == "scale":
                asked["num_preemptible_gpus"] = rng.choice([0, 8, 16])
                stack.run(
                    "config", "set", "numPreemptibleGpus", str(asked["num_preemptible_gpus"]), check=True
                )
            command = DESTROY if step == "destroy" else UP
            # A fault may fail a step, but the state must still be right; the next run, fault-free, retries.
            done = run(step, fault, command) or run(f"{step} rerun", None, command)
            check(f"after {step} under {fault}", step if done or step == "destroy" else None)
    report = (
        f"engine fault campaign (seed {seed}): {len(STEPS)} steps, {results.faults_injected} faults injected, "
        f"runs succeeded/attempted: {results.tally()}, {len(results.violations)} violations"
    )
    failed = "".join(f"\n  failed: {f}" for f in results.failures)
    campaign_report(f"{report}{failed}")
    shortfall = results.success_share < MIN_SUCCESS_SHARE
    headline = (
        f"only {results.success_share:.0%} of the campaign's runs succeeded, below its floor of "
        f"{MIN_SUCCESS_SHARE:.0%}: the invariants were checked on work that did not happen\n"
        if shortfall
        else ""
    )
    broken = "".join(f"\n  VIOLATION {v}" for v in results.violations)
    assert not shortfall and not results.violations, f"{headline}{report}{failed}{broken}"


def _up_killed_during_create(stack: EngineStack, emu_admin: Any, rng: random.Random) -> str:
    """``pulumi up`` SIGKILLed (with its plugins, as a cancelled CI job is) at a random moment after its
    create reached the API and before the cluster is Ready; then ``pulumi cancel``. The cluster's id."""
    with _engine.up_killed_on_exit(stack.dir, stack.env) as running:
        deadline = time.monotonic() + 120
        while not emu_admin.clusters():
            assert running.poll() is None and time.monotonic() < deadline, "the create never reached the API"
            time.sleep(0.05)
        time.sleep(rng.uniform(0, 1.5))
        (cluster,) = emu_admin.clusters()
    return str(cluster["cluster_id"])


@pytest.mark.parametrize("unique_names", [True, False], ids=["unique-names", "duplicate-names"])
def test_a_killed_up_then_a_rerun_makes_no_second_cluster(
    tmp_path, capsys: pytest.CaptureFixture[str], unique_names: bool
) -> None:
    """Issue 22, the engine part: SIGKILL during the create's wait for Ready, `pulumi cancel`, `pulumi up`.
    The rerun makes no second cluster and names the recovery; following it leaves nothing untracked."""
    _engine.require_engine()
    seed = int(os.environ.get("CAMPAIGN_FRESH_SEED") or int.from_bytes(os.urandom(4), "big"))
    rng = random.Random(f"engine-kill:{seed}")
    # Slow enough that the create waits for Ready a few seconds: the kill lands inside that wait.
    with start_emulator(speed=120) as emu:
        emu.admin.settings(unique_names=unique_names)
        stack = EngineStack(tmp_path, emu.base_url)
        stray = _up_killed_during_create(stack, emu.admin, rng)
        rerun = stack.run(*UP)
        said = rerun.stdout + rerun.stderr
        assert rerun.returncode != 0, _engine.output(rerun)
        assert len([c for c in emu.admin.clusters() if c["status"] != "Deleting"]) == 1, _engine.output(rerun)
        assert f"already held by cluster {stray}" in said, _engine.output(rerun)
        assert "Traceback" not in said, _engine.output(rerun)
        # The recovery exactly as the error spells it. (`pulumi refresh --import-pending-creates <urn> <id>`
        # on the pending create the kill left, tried here first, dropped it without importing it.)
        recovery = ["config", "set", "adoptClusterId", stray]
        stack.run(*recovery, check=True)
        stack.run(*UP, check=True)
        live = [c for c in emu.admin.clusters() if c["status"] != "Deleting"]
        tracked = [r.id for r in stack.recorded().resources.values()]
        with capsys.disabled():
            print(
                f"\nengine kill (seed {seed}, {'unique' if unique_names else 'duplicate'} names): rerun refused, "
                f"recovered with `pulumi {' '.join(recovery)}`; {len(live)} live, "
                f"tracked {tracked}"
            )
        assert [c["cluster_id"] for c in live] == [stray] == tracked
        stack.run("destroy", *_engine.UP_FLAGS, check=True)
        assert [c for c in emu.admin.clusters() if c["status"] != "Deleting"] == []
