"""The fault campaign's volumes: seeded sequences of Volume create, adopt, grow, refused shrink, refused
replacement, refresh and destroy, each under an injected fault on the storage API (the provider ->
tests/faultproxy.py -> the emulator). After every sequence: no volume lost, orphaned or duplicated (the
live volumes are exactly those in the stack, those retained by a destroy, and those made outside for an
adoption), and no plan deleted data without the opt-in.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.faultproxy import Fault
from together_clusters.emulator.server import start_emulator
from together_clusters.provider import settings
from together_clusters.provider.client import VOLUMES_PATH, TogetherClient
from together_clusters.provider.errors import TogetherError
from together_clusters.provider.models import StorageCreateRequest
from together_clusters.provider.resource import VolumeProvider

from .runner import ProxiedEmulator
from .stack import CheckFailed, Stack

KEY = "tgp_v1_volume-campaign-key-0123456789"
SPEED = 600

VOLUME_FAULTS: dict[str, Callable[[random.Random], list[Fault]]] = {
    "500-storm": lambda r: [Fault("status", "GET", VOLUMES_PATH, status=500, count=r.randint(1, 4))],
    "429-storm": lambda r: [Fault("status", None, VOLUMES_PATH, status=429, count=r.randint(1, 3))],
    "reset": lambda r: [Fault("reset", None, VOLUMES_PATH, count=r.randint(1, 2))],
    "post-reply-dropped": lambda r: [Fault("drop", "POST", VOLUMES_PATH)],
    "post-reply-truncated": lambda r: [Fault("truncate", "POST", VOLUMES_PATH)],
    "put-reply-dropped": lambda r: [Fault("drop", "PUT", VOLUMES_PATH)],
    "delete-reply-dropped": lambda r: [Fault("drop", "DELETE", VOLUMES_PATH + "/")],
    "get-reply-truncated": lambda r: [Fault("truncate", "GET", VOLUMES_PATH + "/", count=r.randint(1, 3))],
}


class VolumeCampaign(ProxiedEmulator):
    """An emulator, a proxy in front, and the Volume provider pointed at the proxy."""

    def __init__(self, workdir: Path, seed: int) -> None:
        super().__init__(start_emulator(speed=SPEED), seed, KEY)

    def run_sequence(self, index: int) -> None:
        rng = random.Random(f"volumes:{self.seed}:{index}")
        settings.forget_clients()
        stack = Stack(provider=VolumeProvider())  # type: ignore[arg-type]
        name = f"v{self.seed}-{index}"
        code: dict[str, Any] = {"volume_name": name, "region": "us-central-8", "size_tib": rng.randint(1, 3)}
        retained: set[str] = set()
        outside: set[str] = set()
        for _ in range(rng.randint(3, 6)):
            self._operation(rng, stack, name, code, retained, outside)
            settings.forget_clients()
        self._check(stack, retained | outside, name, f"sequence {index}")
        for volume_id in [r.id for r in stack.resources.values()] + sorted(retained | outside):
            with self._direct() as direct, contextlib.suppress(TogetherError):
                direct.delete_volume(volume_id)
        self.results.sequences += 1

    def _operation(
        self,
        rng: random.Random,
        stack: Stack,
        name: str,
        code: dict[str, Any],
        retained: set[str],
        outside: set[str],
    ) -> None:
        current = stack.resources.get(name)
        op = rng.choice(
            ["grow", "grow", "shrink", "rename", "refresh", "destroy"]
            if current
            else ["create", "create", "adopt"]
        )
        news = dict(code)
        if op == "adopt":
            stray = next(iter(outside), None) or self._make_outside(code)
            outside.add(stray)
            news["adopt_volume_id"] = stray
        elif op == "grow":
            news["size_tib"] = code["size_tib"] + rng.randint(1, 2)
        elif op == "shrink":
            news["size_tib"] = max(1, code["size_tib"] - 1) if code["size_tib"] > 1 else 0
        elif op == "rename":
            news["volume_name"] = f"{name}-renamed"
        fault = rng.choice(list(VOLUME_FAULTS)) if rng.random() < 0.8 else None
        if fault is not None:
            self.results.faults[fault] += 1
            for each in VOLUME_FAULTS[fault](rng):
                self.proxy.add(each)
        self.results.operations[op] += 1
        size_before = self._live_size(current.id) if current else None
        try:
            if op == "refresh":
                stack.refresh(name)
            elif op == "destroy":
                assert current is not None
                # The engine retains the volume (retain_on_delete) unless the code allows its data to go.
                del stack.resources[name]
                retained.add(current.id)
            else:
                stack.up(name, news)
                code.update({k: v for k, v in news.items() if k != "adopt_volume_id"})
                if op in ("shrink", "rename"):
                    self.results.violations.append(
                        f"{name} {op} under {fault}: a data-losing plan went ahead"
                    )
        except CheckFailed as exc:
            self.results.failed_operations += 1
            if op not in ("shrink", "rename"):
                self.results.failures.append(f"{name} {op} under {fault}: refused: {exc}")
        except TogetherError as exc:
            self._failed(f"{name} {op} under {fault}", exc)
        except Exception as exc:  # noqa: BLE001 - any other exception is a crash the user would see
            self._crashed(f"{name} {op} under {fault}", exc)
        else:
            self.results.succeeded[op] += 1
        finally:
            self.proxy.clear()
        if op in ("shrink", "rename") and current is not None and self._live_size(current.id) != size_before:
            self.results.violations.append(f"{name} {op} under {fault}: the volume changed though refused")
        if op == "adopt" and name in stack.resources:
            outside.discard(stack.resources[name].id)

    @contextlib.contextmanager
    def _direct(self):  # type: ignore[no-untyped-def]
        with TogetherClient(api_key=KEY, base_url=self.emu.base_url) as direct:
            yield direct

    def _make_outside(self, code: dict[str, Any]) -> str:
        """A volume made with the API directly (as a user with `tg` would), for adoption."""
        with self._direct() as direct:
            request = StorageCreateRequest(region=code["region"], size_tib=1, volume_name=code["volume_name"])
            return str(direct.create_volume(request).volume_id)

    def _live_size(self, volume_id: str) -> int | None:
        with self._direct() as direct:
            return next((v.size_tib for v in direct.list_volumes() if v.volume_id == volume_id), None)

    def _check(self, stack: Stack, kept: set[str], name: str, where: str) -> None:
        with self._direct() as direct:
            live = {str(v.volume_id) for v in direct.list_volumes() if str(v.volume_name).startswith(name)}
        owned = {r.id for r in stack.resources.values()} | kept
        for lost in sorted(owned - live):
            self.results.violations.append(f"{where}: volume {lost} lost")
        for stray in sorted(live - owned):
            self.results.violations.append(f"{where}: volume {stray} orphaned or duplicated (in no state)")
