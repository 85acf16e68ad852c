"""Starting work in a thread pool, even where no thread can start."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def start_in(pool: ThreadPoolExecutor, work: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    """Start ``work(*args)`` in ``pool``; the function that waits for it (and raises what it raised).

    During interpreter exit (a save from an ``atexit`` handler) no thread can start: it runs here.
    """
    try:
        return pool.submit(work, *args).result
    except RuntimeError:
        work(*args)
        return lambda: None
