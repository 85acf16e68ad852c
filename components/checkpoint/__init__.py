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

from .checkpointer import Checkpoint, Checkpointer, Resumed, VerifiedFiles
from .contract import PREEMPTED_EXIT_CODE, RuntimeConfig
from .drain import RequestDrain
from .preemption import PreemptionHandler, Snapshot
from .storage import Backend, FilesystemBackend, S3Backend
from .trials import trial_parameters
from .verifying import CorruptCheckpoint
from .world import WorldCheckpointer

__all__ = [
    "PREEMPTED_EXIT_CODE",
    "Backend",
    "Checkpoint",
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
