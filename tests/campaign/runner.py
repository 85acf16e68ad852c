"""The fault campaign: seeded, bounded random sequences of create, update, refresh, adopt, replace and
delete, each operation under an injected fault, over real HTTP (the provider -> tests/faultproxy.py ->
the emulator), with the invariants of ``invariants.py`` checked after every operation.

A live cluster the stack does not track counts as a violation the moment it exists, unless the very next
run of that stack recovers it: takes it in, or refuses to create naming it (``UntrackedClusterError``),
after which the campaign follows the recovery the error names, as a user would, and counts it.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import random
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.faultproxy import Fault, FaultProxy
from together_clusters.emulator.server import RunningEmulator, start_emulator
from together_clusters.provider import settings
from together_clusters.provider.client import TogetherClient
from together_clusters.provider.errors import TogetherError, UntrackedClusterError, WrongTargetError
from together_clusters.provider.mapping import create_request
from together_clusters.provider.resource import forget_catalog

from .invariants import kube_tokens, violations
from .stack import CheckFailed, Stack

KEY = "tgp_v1_campaign-secret-key-0123456789"
OTHER_KEY = "tgp_v1_campaign-other-project-key-98765"
CLUSTERS = "/v1/compute/clusters"
SPEED = 600

# Faults for any operation, applied at the proxy or the emulator; ``env:`` ones change the provider's target.
PROXY_FAULTS: dict[str, Callable[[random.Random], list[Fault]]] = {
    "500-storm": lambda r: [Fault("status", "GET", CLUSTERS + "/", status=500, count=r.randint(1, 4))],
    "502-storm": lambda r: [Fault("status", None, "/v1/", status=502, count=r.randint(1, 3))],
    "429-storm-retry-after-nan": lambda r: [
        Fault("status", None, "/v1/", status=429, retry_after="nan", count=r.randint(1, 4))
    ],
    "reset": lambda r: [Fault("reset", None, "/v1/", count=r.randint(1, 2))],
    "delay": lambda r: [Fault("delay", None, "/v1/", delay_s=0.3, count=3)],
    "post-reply-dropped": lambda r: [Fault("drop", "POST", CLUSTERS)],
    "post-reply-truncated": lambda r: [Fault("truncate", "POST", CLUSTERS)],
    "post-reply-dropped-listing-lags": lambda r: [
        Fault("stale", "GET", CLUSTERS, count=r.randint(1, 3)),
        Fault("drop", "POST", CLUSTERS),
    ],
    "put-reply-dropped": lambda r: [Fault("drop", "PUT", CLUSTERS + "/")],
    "put-reply-truncated": lambda r: [Fault("truncate", "PUT", CLUSTERS + "/")],
    "delete-reply-dropped": lambda r: [Fault("drop", "DELETE", CLUSTERS + "/")],
    "get-reply-truncated": lambda r: [Fault("truncate", "GET", CLUSTERS + "/", count=r.randint(1, 3))],
    "whoami-storm": lambda r: [Fault("status", "GET", "/v3/whoami", status=503, count=r.randint(1, 3))],
}
# Faults the emulator injects itself (its admin API), after the request took effect unless said otherwise.
EMULATOR_REPLY_FAULTS: dict[str, Callable[[random.Random], dict[str, Any]]] = {
    "emulator-500-after-commit": lambda r: {
        "status": 500,
        "after_commit": True,
        "method": r.choice(["POST", "PUT"]),
    },
    "emulator-reply-truncated": lambda r: {"reply": "truncated", "method": r.choice(["POST", "PUT", "GET"])},
    "emulator-reply-not-json": lambda r: {
        "reply": "invalid_json",
        "method": r.choice(["POST", "PUT", "GET"]),
    },
    "emulator-reply-dropped": lambda r: {"reply": "drop", "method": r.choice(["POST", "PUT", "DELETE"])},
    "emulator-reply-reset-before-commit": lambda r: {
        "reply": "reset",
        "method": r.choice(["POST", "PUT", "GET"]),
    },
    "emulator-reply-unknown-values": lambda r: {
        "reply": "patch",
        "method": "GET",
        "count": 2,
        "patch": {
            "status": "SomeFutureStatus",
            "kube_config": None,
            "cuda_version": None,
            "billing_type": "NEW",
        },
    },
    "emulator-slow-commit": lambda r: {"delay_s": 1.0, "method": r.choice(["POST", "PUT"])},
}
EMULATOR_FAULTS = (*EMULATOR_REPLY_FAULTS, "emulator-restart", "emulator-listing-lags")
TARGET_FAULTS = ("wrong-endpoint", "wrong-key")
ALL_FAULTS = (*PROXY_FAULTS, *EMULATOR_FAULTS, *TARGET_FAULTS)


@dataclass
class Results:
    sequences: int = 0
    # Operations attempted, and those that succeeded, by kind: invariants alone hold just as well when no
    # operation did anything, so a campaign states how much of its work happened.
    operations: Counter[str] = field(default_factory=Counter)
    succeeded: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    failed_operations: int = 0
    violations: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    # Untracked live clusters that appeared (a create lost while the listing lagged) and were recovered
    # by the next run of their stack.
    untracked_appeared: int = 0
    untracked_recovered: int = 0

    @property
    def faults_injected(self) -> int:
        return sum(self.faults.values())

    @property
    def success_share(self) -> float:
        """The share of the operations attempted that succeeded (0 when none was attempted)."""
        attempted = sum(self.operations.values())
        return sum(self.succeeded.values()) / attempted if attempted else 0.0

    def tally(self) -> str:
        """Operations succeeded/attempted by kind, then overall, e.g. ``up 1/1, scale 1/2: 2/3 (67%)``."""
        by_kind = ", ".join(f"{op} {self.succeeded[op]}/{n}" for op, n in sorted(self.operations.items()))
        total = sum(self.operations.values())
        return f"{by_kind}: {sum(self.succeeded.values())}/{total} ({self.success_share:.0%})"

    def summary(self) -> str:
        return (
            f"fault campaign: {self.sequences} sequences, {sum(self.operations.values())} operations "
            f"(succeeded/attempted: {self.tally()}), {self.faults_injected} faults injected "
            f"({len(self.faults)} kinds), {self.failed_operations} operations failed as faults made them, "
            f"{self.untracked_appeared} untracked clusters appeared, {self.untracked_recovered} recovered "
            f"by the next run, {len(self.violations)} violations"
        )


class ProxiedEmulator:
    """What every campaign runs on: an emulator, a fault proxy in front, and the provider pointed at the
    proxy through the environment (put back by :meth:`close`); its seeded sequences run one by one."""

    def __init__(self, emu: RunningEmulator, seed: int, key: str) -> None:
        self.seed = seed
        self.emu = emu
        self.proxy = FaultProxy(emu.base_url)
        self.results = Results()
        self._saved_env = {k: os.environ.get(k) for k in _ENV}
        self._target(self.proxy.url, key)

    def close(self) -> None:
        restore_environ(self._saved_env)
        settings.forget_clients()
        self.proxy.close()
        self.emu.stop()

    def run(self, sequences: int) -> Results:
        for index in range(sequences):
            self.run_sequence(index)
        return self.results

    def run_sequence(self, index: int) -> None:
        raise NotImplementedError

    def _failed(self, operation: str, exc: Exception) -> None:
        """``operation`` failed, as its fault may make it: counted, logged and listed."""
        self.results.failed_operations += 1
        logging.getLogger("campaign").info("%s failed: %s", operation, exc)
        self.results.failures.append(f"{operation}: {type(exc).__name__}: {exc}")

    def _crashed(self, operation: str, exc: Exception) -> None:
        """``operation`` raised what the provider never should: a crash the user would see."""
        self.results.violations.append(f"{operation}: crashed with {type(exc).__name__}: {exc}")

    def _target(self, base_url: str, key: str) -> None:
        """Point the provider at ``base_url`` with ``key``."""
        os.environ["TOGETHER_BASE_URL"] = base_url
        os.environ["TOGETHER_API_KEY"] = key


class Campaign(ProxiedEmulator):
    """One emulator (with a state file, so it can be restarted), a proxy in front, a second emulator
    elsewhere (the wrong endpoint), and the provider pointed at the proxy through the environment."""

    def __init__(self, workdir: Path, seed: int) -> None:
        self.state_path = workdir / "emulator.sqlite"
        super().__init__(start_emulator(speed=SPEED, state_path=self.state_path), seed, KEY)
        self.elsewhere: RunningEmulator = start_emulator(speed=SPEED)
        self.proxy.stale_headers = {"Authorization": f"Bearer {KEY}"}
        self.unique_names = True
        self.logs = io.StringIO()
        os.environ["TOGETHER_RECONCILE_TIMEOUT_S"] = "8"

    def close(self) -> None:
        super().close()
        self.elsewhere.stop()

    def _restart_emulator(self) -> None:
        self.emu.stop()
        self.emu = start_emulator(speed=SPEED, state_path=self.state_path)
        self.proxy.upstream = self.emu.base_url
        self.emu.admin.settings(unique_names=self.unique_names)

    # --- sequences ----------------------------------------------------------------------------

    def run_sequence(self, index: int) -> None:
        rng = random.Random(f"{self.seed}:{index}")
        # Each sequence stands for a series of `pulumi` runs: a new provider process each time.
        settings.forget_clients()
        forget_catalog()
        stack, outside = Stack(), set[str]()
        # Half the sequences run against an API that allows duplicate names: no create may make one.
        self.unique_names = rng.random() < 0.5
        self.emu.admin.settings(unique_names=self.unique_names)
        name = f"s{self.seed}-{index}"
        code = _code(f"{name}-cluster", rng)
        pending: set[str] = set()  # untracked live clusters the next run of the stack must recover
        steps = rng.randint(3, 6)
        step = 0
        with self._captured():
            # One more (fault-free) run when the last one left an untracked cluster: the run that recovers it.
            while step < steps or pending:
                where = f"sequence {index} step {step}"
                refusal = self._operation(rng, stack, name, code, outside, rerun=bool(pending))
                settings.forget_clients()
                pending = self._after_step(stack, code, name, outside, pending, refusal, where)
                step += 1
        with self._captured():
            for resource in list(stack.resources):
                stack.destroy(resource)
        self._delete_outside(outside)
        self._check(stack, set(), f"sequence {index} after destroy")
        # Reported above; deleted so that one sequence's leftover is not counted again by every later one.
        self._delete_outside(self._untracked(stack, set()))
        self.results.sequences += 1

    def _after_step(
        self,
        stack: Stack,
        code: dict[str, Any],
        name: str,
        outside: set[str],
        pending: set[str],
        refusal: UntrackedClusterError | None,
        where: str,
    ) -> set[str]:
        """Check every invariant after a step; returns the untracked clusters the next run must recover."""
        untracked = self._untracked(stack, outside)
        for cluster_id in sorted(pending):
            if refusal is not None and refusal.cluster_id == cluster_id:
                # The run refused and named it: do what the error says, as a user would.
                code["adopt_cluster_id"] = cluster_id
                try:
                    stack.up(name, dict(code))
                except (TogetherError, CheckFailed) as exc:
                    self.results.violations.append(f"{where}: the recovery {refusal} named failed: {exc}")
                untracked = self._untracked(stack, outside)
            if cluster_id in untracked:
                self.results.violations.append(
                    f"{where}: untracked cluster {cluster_id} not recovered by the rerun"
                )
            else:
                self.results.untracked_recovered += 1
        appeared = untracked - pending
        self.results.untracked_appeared += len(appeared)
        self._check(stack, outside | appeared, where)
        return appeared

    def _untracked(self, stack: Stack, outside: set[str]) -> set[str]:
        tracked = {r.id for r in stack.resources.values()}
        return {c["cluster_id"] for c in self._live()} - tracked - outside

    def _operation(
        self,
        rng: random.Random,
        stack: Stack,
        name: str,
        code: dict[str, Any],
        outside: set[str],
        rerun: bool = False,
    ) -> UntrackedClusterError | None:
        """One random operation under a random fault; returns the refusal of an untracked namesake.

        ``rerun``: the last step left an untracked cluster; this is the stack's next run, a fault-free
        ``up`` (the campaign asserts that this run recovers it).
        """
        exists = name in stack.resources
        op = rng.choice(
            ["update", "update", "refresh", "replace", "delete"] if exists else ["create", "create", "adopt"]
        )
        if rerun:
            op = "create" if not exists else "update"
        if op == "adopt":
            # Adopt the cluster made outside for an earlier adoption that failed, or make one now.
            stray = next(iter(outside), None) or self._make_outside(code)
            if stray is None:
                op = "create"
            else:
                outside.add(stray)
                code["adopt_cluster_id"] = stray
        elif op == "update":
            # One compute class per update: the platform cannot convert one into the other.
            if rng.random() < 0.5:
                code["num_gpus"] = rng.choice([8, 16])
            else:
                code["num_preemptible_gpus"] = rng.choice([0, 8, 16])
        elif op == "replace":
            code["gpu_type"] = "H200_SXM" if code["gpu_type"] == "H100_SXM" else "H100_SXM"
        fault = rng.choice(ALL_FAULTS) if rng.random() < 0.8 else None
        if (fault in TARGET_FAULTS and op in ("create", "adopt")) or rerun:
            fault = None
        refusal: UntrackedClusterError | None = None
        self._inject(fault, rng)
        self.results.operations[op] += 1
        try:
            if op in ("create", "adopt", "update", "replace"):
                stack.up(name, dict(code))
            elif op == "refresh":
                stack.refresh(name)
            else:
                stack.destroy(name)
                code.pop("adopt_cluster_id", None)
        except UntrackedClusterError as exc:
            self.results.failed_operations += 1
            refusal = exc
            self.results.failures.append(f"{name} {op} under {fault}: refused: {exc}")
        except WrongTargetError:
            self.results.failed_operations += 1
            if fault not in TARGET_FAULTS:
                self.results.violations.append(f"{op} under {fault}: refused as a wrong target")
        except (TogetherError, CheckFailed) as exc:
            self._failed(f"{name} {op} under {fault}", exc)
        except Exception as exc:  # noqa: BLE001 - any other exception is a crash the user would see
            self._crashed(f"{name} {op} under {fault}", exc)
        else:
            self.results.succeeded[op] += 1
            if fault in TARGET_FAULTS and op in ("refresh", "delete"):
                self.results.violations.append(f"{op} under {fault}: not refused")
        finally:
            self._clear_faults()
        if op == "adopt" and name in stack.resources:
            outside.discard(code["adopt_cluster_id"])
        return refusal

    def _inject(self, fault: str | None, rng: random.Random) -> None:
        if fault is None:
            return
        self.results.faults[fault] += 1
        if fault in PROXY_FAULTS:
            for each in PROXY_FAULTS[fault](rng):
                self.proxy.add(each)
        elif fault in EMULATOR_REPLY_FAULTS:
            self.emu.admin.add_fault(**{"count": 1, "path": CLUSTERS, **EMULATOR_REPLY_FAULTS[fault](rng)})
        elif fault == "emulator-listing-lags":
            # New clusters stay out of the listing for ~4 real seconds, and the create's reply is lost.
            self.emu.admin.settings(list_lag_s=4 * SPEED)
            self.emu.admin.add_fault(reply="drop", method="POST", path=CLUSTERS)
        elif fault == "emulator-restart":
            self._restart_emulator()
        elif fault == "wrong-endpoint":
            self._target(self.elsewhere.base_url, KEY)
        elif fault == "wrong-key":
            self._target(self.proxy.url, OTHER_KEY)

    def _clear_faults(self) -> None:
        self.proxy.clear()
        self.emu.admin.clear_faults()
        self.emu.admin.settings(list_lag_s=0, unique_names=self.unique_names)
        self._target(self.proxy.url, KEY)

    # --- outside the stack --------------------------------------------------------------------

    def _make_outside(self, code: dict[str, Any]) -> str | None:
        """A cluster made with the API directly (as a user with `tg` would), for adoption; None (and the
        reason logged) when the API refuses it, e.g. a 409 for a name a live cluster already holds."""
        inputs = {k: v for k, v in code.items() if k != "adopt_cluster_id"}
        try:
            with TogetherClient(api_key=KEY, base_url=self.emu.base_url) as direct:
                return str(direct.create_cluster(create_request(inputs)).cluster_id)
        except TogetherError as exc:
            self.results.failures.append(f"making a cluster to adopt: {exc}")
            return None

    def _delete_outside(self, ids: set[str]) -> None:
        with TogetherClient(api_key=KEY, base_url=self.emu.base_url) as direct:
            for cluster_id in ids:
                with contextlib.suppress(TogetherError):
                    direct.delete_cluster(cluster_id)

    # --- invariants ---------------------------------------------------------------------------

    def _live(self) -> list[dict[str, Any]]:
        with TogetherClient(api_key=KEY, base_url=self.emu.base_url) as direct:
            clusters = direct.list_clusters()
        return [c.model_dump(mode="json") for c in clusters if c.status != "Deleting"]

    def _check(self, stack: Stack, outside: set[str], where: str) -> None:
        live = self._live()
        secrets = {KEY, OTHER_KEY} | kube_tokens(live)
        found = violations(stack, live, outside, secrets, self.logs.getvalue())
        self.results.violations += [f"{where}: {v}" for v in found]

    @contextlib.contextmanager
    def _captured(self) -> Iterator[None]:
        """Everything the provider reports (stderr) and logs, kept for the secrets check."""
        handler = logging.StreamHandler(self.logs)
        root = logging.getLogger()
        level = root.level
        root.addHandler(handler)
        root.setLevel(logging.DEBUG)
        try:
            with contextlib.redirect_stderr(self.logs):
                yield
        finally:
            root.removeHandler(handler)
            root.setLevel(level)


_ENV = ("TOGETHER_BASE_URL", "TOGETHER_API_KEY", "TOGETHER_RECONCILE_TIMEOUT_S")


def restore_environ(saved: dict[str, str | None]) -> None:
    """Put back the environment variables as ``saved`` found them (``None``: it was not set)."""
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _code(cluster_name: str, rng: random.Random) -> dict[str, Any]:
    return {
        "cluster_name": cluster_name,
        "region": "us-central-8",
        "gpu_type": rng.choice(["H100_SXM", "H200_SXM"]),
        "num_gpus": 8,
        "num_preemptible_gpus": rng.choice([0, 8]),
        "nvidia_version_id": "nv-570-cu128-ubuntu2204",
        "ready_timeout_minutes": 3,
    }
