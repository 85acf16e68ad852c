"""A small real training loop on the checkpoint runtime, for pods the twin runs as local processes.

It resumes from the newest checkpoint, reading it once (the runtime reports ``resumed step=<n>``), takes a step every
``STEP_SECONDS``, saves every ``SAVE_EVERY`` steps and, on SIGTERM, saves the latest step through the
runtime's :class:`PreemptionHandler` and exits 143. Every checkpoint records the pod that wrote it (its
``HOSTNAME``), so a test can tell the preempted process's last save from its replacement's. Each periodic save
prints ``saved step=<n>``, so a test waits for a save instead of sleeping through one.
"""

from __future__ import annotations

import os
import time

from together_clusters.components.checkpoint import Checkpointer, PreemptionHandler, Snapshot


def main() -> None:
    step_seconds = float(os.environ.get("STEP_SECONDS", "0.05"))
    save_every = int(os.environ.get("SAVE_EVERY", "20"))
    pod = os.environ.get("HOSTNAME", "")
    checkpointer = Checkpointer.from_env()
    resumed = checkpointer.resume(lambda checkpoint: int(checkpoint.open("state").read()))
    step = 0 if resumed is None else resumed.state
    latest = Snapshot(step, {"state": str(step).encode()}, {"pod": pod})
    handler = PreemptionHandler(checkpointer, lambda: latest).install()
    print(f"training from step={step}", flush=True)
    while not handler.stopping.is_set():
        time.sleep(step_seconds)
        step += 1
        latest = Snapshot(step, {"state": str(step).encode()}, {"pod": pod})
        if step % save_every == 0:
            checkpointer.save(step, latest.files, latest.metadata)
            print(f"saved step={step}", flush=True)
    # Returning is safe: after SIGTERM the interpreter waits for the handler's save, which exits 143.


if __name__ == "__main__":
    main()
