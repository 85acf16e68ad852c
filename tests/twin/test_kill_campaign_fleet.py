"""The kill campaign over a fleet stack (issue 41, part 1): examples/fleet as a user runs it (a standard-only
manager, two worker clusters in two regions, JobSet and Kueue from their charts on each, a ``FleetQueue`` on
MultiKueue with the fleet's dispatcher, a ``Sweep`` of two trials and a ``TrainingRun`` submitted to it), on the
twin through the real engine. us-east-2 has no preemptible capacity, so the workloads go to us-central-8.

For each seed, ``pulumi up`` is SIGKILLed (with every process it started) after a number of the engine's
resource events drawn from the seed, then rerun as the docs say (``pulumi cancel``, ``pulumi up``; a cluster
the killed run made but did not record is adopted through the entry the rerun's error names,
``pulumi config set --path adoptClusterIds.<cluster_name> <id>``); then ``pulumi destroy`` is killed the same
way and rerun.

Checked against the live clusters and the emulator, not the state: each rerun succeeds with no Server-Side
Apply conflict; the three clusters are live once each and the state tracks exactly them (none paid for twice);
every Kubernetes object the state records exists live in its own cluster, once; each workload runs in one
region only, each of its pods once (nothing here disrupts them), none on the manager; the state holds no
worker credential (the tokens of the manager's kubeconfig Secrets, the workers' admin keys) in plain text;
after the destroy's rerun the state is empty and no cluster of the stack is live.

One stack a run: the up killed at the point a fixed seed draws (UP_SEED, while the clusters are being
created; ``FLEET_KILL_CAMPAIGN_UP_SEED=<seed>`` draws another), the destroy at a point drawn from a seed fresh
each run (``FLEET_KILL_CAMPAIGN_FRESH_SEED=<seed>`` replays it), both reported in the run's "campaign reports"
summary. A stack brings up three clusters with their charts, about five minutes on 2 cores alone.
"""

from __future__ import annotations

import base64
import json
import os
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests import _engine
from together_clusters.emulator.server import RunningEmulator
from together_clusters.platform import JOBSET_NAME_LABEL
from together_clusters.provider.kubeconfig import kubeconfig_text

from ._kill import (
    CHARTS,
    SEVERAL_ADOPTION,
    KilledProject,
    Outcome,
    RunningPods,
    campaign_emulator,
    converged,
    recorded_object_violations,
    seed_of,
)
from ._programs import FLEET_EAST, FLEET_EXAMPLE, fleet_config
from ._twin import GPU, REGION, kube_clients

pytestmark = [pytest.mark.engine, pytest.mark.twin]
API_KEY = "tgp_v1_twin-fleet-kill-0123456789abcdef"
CONFIG = fleet_config(REGION, GPU, CHARTS)
# The example's clusters (its resource names; cluster_name fleet-<name>-test) and, in the state, the name of the
# Kubernetes provider of each: the manager's from provider_for, each worker's from the FleetQueue.
CLUSTERS = {"hub": "hub", "east": "fleet-east", "west": "fleet-west"}
# The pods each workload runs, when all run: a trial one, the TrainingRun its coordinator and two workers.
WORKLOADS = {"ablation-0": 1, "ablation-1": 1, "llm": 3}
# The up's kill point comes from a fixed seed: 50 kills it at event 3 or 4, once the three clusters' creates
# have reached the platform and before they are recorded (in full runs the engine's event 4 could come before
# any create was sent); the rerun finds each made but not recorded and adopts it through its own entry (with the
# example's adoption reverted, the rerun fails: "cluster_name 'fleet-west-test' is already held by cluster
# ..."). The destroy's kill point comes from a seed drawn fresh each run. One stack a run: a seed's stack took
# 5 minutes alone and 8 to 12 in a full run, where two seeds (a fixed one and a fresh one, each killing both)
# added 9.5 minutes to the suite's wall time.
UP_SEED = 50
# Resource events (a step's start and its outputs) of a clean run of the example, measured: the kill is drawn
# between the first and the last of them.
UP_EVENTS = 696
DESTROY_EVENTS = 702


# Which part of the fleet a kill hit: the first of these found in a resource in flight (type::name).
PHASES = (
    (":Cluster::", "clusters"),
    ("-controllers", "charts"),
    ("::fleet", "fleet queue"),
    ("::ablation", "sweep"),
    ("::llm", "training run"),
)


@dataclass
class FleetStack(KilledProject):
    """One seed's stack of examples/fleet (own project and state) on the module's emulator."""

    emulator: RunningEmulator

    def __post_init__(self) -> None:
        super().__post_init__()
        for key, value in CONFIG.items():
            self.run("config", "set", key, value, check=True)

    @classmethod
    def on(cls, tmp: Path, emulator: RunningEmulator) -> FleetStack:
        extra = {"TOGETHER_BASE_URL": emulator.base_url, "TOGETHER_API_KEY": API_KEY}
        program = (FLEET_EXAMPLE / "__main__.py").read_text()
        return cls(tmp, "kill-fleet", program, extra, PHASES, SEVERAL_ADOPTION, emulator)

    def live_clusters(self) -> dict[str, list[dict[str, Any]]]:
        """The live clusters of each of the example's names (a list: two would be one paid for twice)."""
        found: dict[str, list[dict[str, Any]]] = {name: [] for name in CLUSTERS}
        for cluster in self.emulator.admin.clusters():
            for name in CLUSTERS:
                if (
                    cluster.get("cluster_name") == f"fleet-{name}-test"
                    and cluster.get("status") != "Deleting"
                ):
                    found[name].append(cluster)
        return found

    def apis(self) -> dict[str, client.ApiClient]:
        """A client of each cluster that is live once, with its kubeconfig."""
        return {
            name: kube_clients(live[0]["kube_config"])
            for name, live in self.live_clusters().items()
            if len(live) == 1 and live[0].get("kube_config")
        }


class RegionWatch(RunningPods):
    """The workloads' pods in each cluster all along, by JobSet name."""

    def __init__(self, stack: FleetStack) -> None:
        super().__init__(stack.apis, lambda labels: labels.get(JOBSET_NAME_LABEL), expected=len(CLUSTERS))

    def all_ran(self) -> bool:
        return all(len(self.pods.get(w, ())) >= count for w, count in WORKLOADS.items())

    def violations(self) -> list[str]:
        """Each workload in one worker's region, never on the manager, each pod once, never more at once than
        it has."""
        found = []
        for workload, count in WORKLOADS.items():
            pods = self.pods.get(workload, set())
            clusters = sorted({cluster for cluster, _ in pods})
            if len(pods) != count or self.most_at_once.get(workload, 0) > count:
                found.append(
                    f"{workload} ran as pods {sorted(pods)} (at most {self.most_at_once.get(workload, 0)} "
                    f"at once), expected {count}"
                )
            if len(clusters) > 1 or "hub" in clusters:
                found.append(f"{workload} ran in {clusters}, expected one worker's region")
        return found


def live_violations(stack: FleetStack) -> list[str]:
    """The live clusters against the state: each of the three live once and tracked; each Kubernetes object
    recorded live, once, in the cluster of its provider."""
    resources = stack.resources()
    tracked = sorted(r["id"] for r in resources if r["type"].endswith(":Cluster"))
    live = stack.live_clusters()
    live_ids = sorted(c["cluster_id"] for clusters in live.values() for c in clusters)
    if live_ids != tracked or any(len(clusters) != 1 for clusters in live.values()):
        return [f"live clusters {live_ids}, the state tracks {tracked}"]
    apis = stack.apis()
    by_provider = {provider: apis[name] for name, provider in CLUSTERS.items()}

    def api_of(resource: dict[str, Any]) -> client.ApiClient:
        provider = resource.get("provider", "").split("::")[-2]  # urn::id: the provider's name
        return by_provider[provider]

    return recorded_object_violations(resources, api_of)


def credentials(stack: FleetStack) -> list[str]:
    """What reaches a worker: the token of each kubeconfig the manager holds in its Secrets (MultiKueue's and
    the dispatcher's), and each worker's admin credential."""
    held = []
    hub = stack.apis()["hub"]
    for secret in client.CoreV1Api(hub).list_namespaced_secret("kueue-system").items:
        for value in (secret.data or {}).values():
            for config in _kubeconfigs(base64.b64decode(value).decode(errors="replace")):
                held += _user_credentials(config)
    for name, live in stack.live_clusters().items():
        if name != "hub" and live:
            held += _user_credentials(yaml.safe_load(kubeconfig_text(live[0]["kube_config"]) or "") or {})
    return held


def _user_credentials(config: dict[str, Any]) -> list[str]:
    """The tokens and client keys of a kubeconfig's users."""
    users = [u.get("user") or {} for u in config.get("users") or []]
    return [str(u[key]) for u in users for key in ("token", "client-key-data") if u.get(key)]


def _kubeconfigs(text: str) -> list[dict[str, Any]]:
    """The kubeconfigs in a Secret's value: one, or a JSON object of them by worker (the dispatcher's)."""
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError:
        return []
    if isinstance(loaded, dict) and "users" in loaded:
        return [loaded]
    if isinstance(loaded, dict):
        return [c for v in loaded.values() if isinstance(v, str) for c in _kubeconfigs(v)]
    return []


def secret_violations(stack: FleetStack) -> list[str]:
    """No worker credential in the state in plain text (and at least one found to look for)."""
    exported = json.dumps(_engine.stack_export(stack.dir, stack.env))
    held = credentials(stack)
    if not held:
        return ["no worker credential found on the manager or the workers to look for"]
    return [f"the state holds a worker credential in plain text ({c[:6]}...)" for c in held if c in exported]


@pytest.fixture(scope="module")
def emulator() -> Iterator[RunningEmulator]:
    with campaign_emulator() as running:
        running.admin.set_capacity(FLEET_EAST, GPU, 0)
        yield running


# Twice the suite's 900 s: a stack of three clusters brought up, its workloads run and destroyed took 12:26 in a
# full run on 2 cores, where a slower machine would cross 900 s with nothing wrong.
@pytest.mark.timeout(1800)
def test_a_fleet_killed_anywhere_converges_on_rerun(
    emulator: RunningEmulator, tmp_path: Path, campaign_report: Callable[[str], None]
) -> None:
    up_seed = int(os.environ.get("FLEET_KILL_CAMPAIGN_UP_SEED") or UP_SEED)
    seed, replay = seed_of("fresh", "FLEET_KILL_CAMPAIGN_FRESH_SEED")
    up_rng = random.Random(f"fleet-kill-campaign:{up_seed}")
    destroy_rng = random.Random(f"fleet-kill-campaign:{seed}:destroy")
    outcome = Outcome(seed, campaign=f"fleet kill campaign (the up's seed {up_seed}; the destroy's)")
    stack = FleetStack.on(tmp_path, emulator)
    try:
        with RegionWatch(stack) as watch:
            # Not before the three creates reached the platform: then the kill leaves clusters live that the
            # state does not record, whatever the machine's load (the adoption path).
            created = lambda: all(stack.live_clusters().values())  # noqa: E731
            outcome.kills.append(stack.killed("up", UP_EVENTS, up_rng, not_before=created))
            proc, how = stack.rerun("up")
            outcome.steps.append(f"up {how}: exit {proc.returncode}")
            if failed := converged(proc, "the up"):
                outcome.violations += failed
            else:
                outcome.violations += live_violations(stack) + secret_violations(stack)
                deadline = time.monotonic() + 300
                while not watch.all_ran() and time.monotonic() < deadline:
                    time.sleep(1)
                # A moment more: a duplicate copy would start after the first.
                time.sleep(5)
        outcome.violations += watch.violations()
        ran = {w: sorted(pods) for w, pods in sorted(watch.pods.items())}
        outcome.steps.append(f"workload pods that ran, by cluster: {ran}")

        outcome.kills.append(stack.killed("destroy", DESTROY_EVENTS, destroy_rng))
        proc, how = stack.rerun("destroy")
        outcome.steps.append(f"destroy {how}: exit {proc.returncode}")
        outcome.violations += converged(proc, "the destroy")
        if left := stack.resources():
            outcome.violations.append(
                f"the state still holds {len(left)} resources: {[r['urn'] for r in left][:5]}"
            )
        if live := {name: len(c) for name, c in stack.live_clusters().items() if c}:
            outcome.violations.append(f"clusters still live after the destroy: {live}")
    finally:
        campaign_report(outcome.report() + replay)
        if any(stack.live_clusters().values()):  # never leave a cluster running on the module's emulator
            stack.run("destroy", *_engine.UP_FLAGS)
    assert not outcome.violations, outcome.report()
