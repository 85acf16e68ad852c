"""What every section is given: where to work, how hard to try, where to say what it is doing."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Scale:
    """How much a run measures: the full benchmark, or the quick smoke run (small sizes, one repetition)."""

    quick: bool
    repetitions: int
    # Section 1 compares runs of about 2 s that the machine's other jobs stretch by up to 1 s: more pairs.
    engine_repetitions: int
    stack_size: int
    fleet_stacks: int
    fleet_stack_size: int
    emulator_clusters: int
    list_clusters: int
    load_seconds: float
    ready_speeds: tuple[float, ...]
    checkpoint_sizes_mib: tuple[int, int]
    checkpoint_cap_mib: int

    @staticmethod
    def full() -> Scale:
        return Scale(
            quick=False,
            repetitions=3,
            engine_repetitions=5,
            stack_size=20,
            fleet_stacks=5,
            fleet_stack_size=20,
            emulator_clusters=200,
            list_clusters=1000,
            load_seconds=3.0,
            ready_speeds=(60.0, 20.0),
            checkpoint_sizes_mib=(1024, 1536),
            checkpoint_cap_mib=512,
        )

    @staticmethod
    def smoke() -> Scale:
        return Scale(
            quick=True,
            repetitions=1,
            engine_repetitions=1,
            stack_size=2,
            fleet_stacks=2,
            fleet_stack_size=1,
            emulator_clusters=10,
            list_clusters=50,
            load_seconds=0.5,
            ready_speeds=(600.0,),
            # The S3 save's transfer threads need about 150 MiB of data memory whatever the size (measured
            # the same at 272 and 528 MiB): a smaller cap fails them, which says nothing about boundedness.
            checkpoint_sizes_mib=(8, 272),
            checkpoint_cap_mib=256,
        )


@dataclass
class Context:
    """A benchmark run: its scale, a scratch directory, and progress output (stderr)."""

    scale: Scale
    workdir: Path
    started: float = field(default_factory=time.monotonic)

    def progress(self, message: str) -> None:
        print(f"[bench {time.monotonic() - self.started:6.0f}s] {message}", file=sys.stderr, flush=True)
