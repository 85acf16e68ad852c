"""In-container checkpoint runtime for workloads on preemptible nodes. Imports nothing from Pulumi.

Typical use inside a training or fine-tuning container::

    from together_clusters.components.checkpoint import Checkpointer, PreemptionHandler, Snapshot

    ckpt = Checkpointer.from_env()              # CHECKPOINT_DIR or CHECKPOINT_S3_* from the component
    resumed = ckpt.restore()                    # newest complete checkpoint when CHECKPOINT_RESUME=true
    step, state = (resumed.step, resumed.files) if resumed else (0, initial_state())
    latest = Snapshot(step, state)
    PreemptionHandler(ckpt, lambda: latest).install()   # SIGTERM: save `latest`, exit 143
    while step < total:
        state = train_one_step(state); step += 1
        latest = Snapshot(step, state)          # replace the reference only once the step is whole
        if step % 100 == 0:
            ckpt.save(step, state)
"""

from .checkpointer import Checkpoint, Checkpointer, CorruptCheckpoint
from .contract import PREEMPTED_EXIT_CODE, RuntimeConfig
from .drain import RequestDrain
from .preemption import PreemptionHandler, Snapshot
from .storage import Backend, FilesystemBackend, S3Backend
from .trials import trial_parameters

__all__ = [
    "PREEMPTED_EXIT_CODE",
    "Backend",
    "Checkpoint",
    "Checkpointer",
    "CorruptCheckpoint",
    "FilesystemBackend",
    "PreemptionHandler",
    "RequestDrain",
    "RuntimeConfig",
    "S3Backend",
    "Snapshot",
    "trial_parameters",
]
