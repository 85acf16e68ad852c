"""Side by side measurement: interleaved repetitions, so a slow minute of a shared machine hits every
candidate alike."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping


def interleaved(
    candidates: Mapping[str, Callable[[], float | None]], repetitions: int, progress: Callable[[str], None]
) -> dict[str, list[float]]:
    """Run every candidate once per repetition, alternating the order (A B, then B A, ...).

    A candidate returns the seconds it measured itself, or None to be timed as a whole.
    """
    names = list(candidates)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for rep in range(repetitions):
        order = names if rep % 2 == 0 else list(reversed(names))
        for name in order:
            started = time.perf_counter()
            measured = candidates[name]()
            elapsed = time.perf_counter() - started if measured is None else measured
            samples[name].append(elapsed)
            progress(f"  {name}: {elapsed:.3f} s (repetition {rep + 1}/{repetitions})")
    return samples
