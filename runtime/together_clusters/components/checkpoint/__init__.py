"""In-container checkpoint runtime for workloads on preemptible nodes. Imports nothing from Pulumi.

Typical use inside a training or fine-tuning container::

    from together_clusters.components.checkpoint import Checkpointer, PreemptionHandler, Snapshot

    ckpt = Checkpointer.from_env()              # CHECKPOINT_DIR or CHECKPOINT_S3_* from the component
    # When CHECKPOINT_RESUME=true: load the newest checkpoint that reads back whole. Each file is a stream
    # (read it in chunks: any size) handing over only verified bytes; damage met while loading voids the
    # load and the next older checkpoint is loaded instead.
    resumed = ckpt.resume(lambda checkpoint: load_state(checkpoint.open("weights.bin")))
    if resumed:
        step, state = resumed.step, resumed.state
    else:
        step, state = 0, initial_state()
    latest = Snapshot(step, to_files(state))    # values may be bytes or iterables of chunks
    handler = PreemptionHandler(ckpt, lambda: latest).install()  # SIGTERM: save `latest`, exit 143
    while step < total and not handler.stopping.is_set():
        state = train_one_step(state); step += 1
        latest = Snapshot(step, to_files(state))  # replace the reference only once the step is whole
        if step % 100 == 0:
            ckpt.save(step, to_files(state))    # saves, then prunes to the newest CHECKPOINT_KEEP

``ckpt.restore()`` returns the checkpoint instead, every file checked whole before (a second pass), for
readers that want whole files on disk first (memory maps).

Launchers that exit 1 on SIGTERM (torchrun) run under ``python -m
together_clusters.components.checkpoint.launch -- torchrun ...``, which turns a preemption into 143.
"""

# Names load on first use: the platform's vocabulary reads the grace limit from .contract, and importing that
# module runs this one, which must then not load blake3 and the storage backends.
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Checkpoint": ".checkpointer",
    "Checkpointer": ".checkpointer",
    "Resumed": ".checkpointer",
    "VerifiedFiles": ".checkpointer",
    "PREEMPTED_EXIT_CODE": ".contract",
    "RuntimeConfig": ".contract",
    "RequestDrain": ".drain",
    "PreemptionHandler": ".preemption",
    "Snapshot": ".preemption",
    "Backend": ".storage",
    "FilesystemBackend": ".storage",
    "S3Backend": ".storage",
    "trial_parameters": ".trials",
    "CorruptCheckpoint": ".errors",
    "CheckpointSuperseded": ".errors",
    "WorldCheckpointer": ".world",
}

if TYPE_CHECKING:
    from .checkpointer import Checkpoint, Checkpointer, Resumed, VerifiedFiles
    from .contract import PREEMPTED_EXIT_CODE, RuntimeConfig
    from .drain import RequestDrain
    from .errors import CheckpointSuperseded, CorruptCheckpoint
    from .preemption import PreemptionHandler, Snapshot
    from .storage import Backend, FilesystemBackend, S3Backend
    from .trials import trial_parameters
    from .world import WorldCheckpointer


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name], __name__), name)


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "PREEMPTED_EXIT_CODE",
    "Backend",
    "Checkpoint",
    "CheckpointSuperseded",
    "Checkpointer",
    "CorruptCheckpoint",
    "FilesystemBackend",
    "PreemptionHandler",
    "RequestDrain",
    "Resumed",
    "RuntimeConfig",
    "S3Backend",
    "Snapshot",
    "VerifiedFiles",
    "WorldCheckpointer",
    "trial_parameters",
]
