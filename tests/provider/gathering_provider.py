"""A dynamic provider whose creates wait for one another: each returns once ``count`` creates are inside the
provider process at the same time, or fails after ``patience_s``.

tests/provider/test_engine_host.py declares ``count`` of them in one stack: the stack comes up only if the
dynamic-provider host serves that many calls at once. Pickled by reference as
``tests.provider.gathering_provider.GatheringProvider`` (the engine runs with the repository root on
PYTHONPATH).
"""

from __future__ import annotations

import threading
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, Resource, ResourceProvider

_barriers: dict[int, threading.Barrier] = {}
_lock = threading.Lock()


def _barrier(count: int, patience_s: float) -> threading.Barrier:
    with _lock:
        if count not in _barriers:
            _barriers[count] = threading.Barrier(count, timeout=patience_s)
        return _barriers[count]


class GatheringProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        count = int(props["count"])
        try:
            _barrier(count, float(props["patience_s"])).wait()
        except threading.BrokenBarrierError:
            raise RuntimeError(f"fewer than {count} creates ran at once in the provider host") from None
        return CreateResult(id_=props["name"], outs={**props, "gathered": count})


class Gathering(Resource):
    gathered: pulumi.Output[int]

    def __init__(self, name: str, count: int, patience_s: float) -> None:
        props = {"name": name, "count": count, "patience_s": patience_s, "gathered": None}
        super().__init__(GatheringProvider(), name, props)
