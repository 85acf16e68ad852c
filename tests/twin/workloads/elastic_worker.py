"""A stand-in for one TrainingRun worker: torchrun elastic's agent and its one training process, for pods the
twin runs as local processes (torch cannot be installed here, so neither torchrun nor collectives are real).

What is real: the TrainingRun contract's environment (``WORKER_RANK`` is the rank, as with one process per
worker; ``WORLD_SIZE``; the checkpoint runtime's ``CHECKPOINT_*``), the world checkpoints
(:class:`WorldCheckpointer`: shards, rank 0's commit, every rank restoring the newest committed step and
reporting ``resumed step=``), SIGTERM handling and the exit code torchrun gives it (1, which the launch wrapper
turns into 143).

What stands in for torchrun: the rendezvous is a folder on the shared checkpoint volume
(``.rendezvous-<PET_RDZV_ID>``, in the spirit of torch's FileStore) instead of the c10d store the coordinator
hosts, and the agent's elastic behaviour is played by hand: a worker (re)joining opens a new round when the
newest one is complete, training starts once a round has every rank, and a surviving agent that sees a newer
round stops its training process and joins it, as torchrun's agent restarts its workers when a node waits at
the rendezvous. Each round every rank restores the newest committed step, so the world resumes together,
and saves its shards under the round's id (the rendezvous id and the round's number, which every member of
the round agrees on), so a step is committed only from shards of one round.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from together_clusters.components.checkpoint import Checkpointer, WorldCheckpointer

STEP_SECONDS = float(os.environ.get("STEP_SECONDS", "0.05"))
SAVE_EVERY = int(os.environ.get("SAVE_EVERY", "20"))
COMMIT_TIMEOUT_SECONDS = 2.0


class Rendezvous:
    """Rounds of the world as folders ``round-<n>`` holding one ``rank-<r>`` file per member."""

    def __init__(self, folder: Path, rank: int, world_size: int, member: str) -> None:
        self.folder = folder
        self.rank = rank
        self.world_size = world_size
        self.member = member

    def newest(self) -> int:
        rounds = [int(p.name.split("-")[1]) for p in self.folder.glob("round-*")]
        return max(rounds, default=0)

    def members(self, number: int) -> set[int]:
        return {int(p.name.split("-")[1]) for p in (self.folder / f"round-{number:06d}").glob("rank-*")}

    def join(self) -> int:
        """Join the newest round if it still waits for this rank, else open the next; wait until it is
        complete (following any newer round opened meanwhile); its number."""
        newest = self.newest()
        members = self.members(newest) if newest else set()
        number = (
            newest if newest and self.rank not in members and len(members) < self.world_size else newest + 1
        )
        while True:
            folder = self.folder / f"round-{number:06d}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"rank-{self.rank}").write_text(self.member)
            while len(self.members(number)) < self.world_size and self.newest() == number:
                time.sleep(0.05)
            if self.newest() == number:
                return number
            number = self.newest()  # someone opened a newer round: the world regroups there


def train_round(checkpointer: Checkpointer, rendezvous: Rendezvous, run_id: str, number: int) -> None:
    """One training process's life, until a newer round shows the membership changed."""
    world = WorldCheckpointer(checkpointer, rendezvous.rank, rendezvous.world_size, f"{run_id}/{number}")
    restored = world.restore()  # reports ``resumed step=<n>`` when there is a committed step
    step = 0
    if restored is not None:
        with restored:
            step = int(restored.open("state").read())
    print(f"round={number} rank={world.rank} start={step}", flush=True)
    while rendezvous.newest() == number:
        time.sleep(STEP_SECONDS)
        step += 1
        if step % SAVE_EVERY == 0:
            world.save_shard(step, {"state": str(step).encode()})
            if world.rank == 0 and world.commit(step, timeout_seconds=COMMIT_TIMEOUT_SECONDS):
                print(f"committed step={step}", flush=True)
    print(f"round={number} rank={world.rank} stopped at step={step}: the world changed", flush=True)


def main() -> int:
    # torchrun's agent raises SignalException on SIGTERM and exits 1 (the launch wrapper reports 143).
    signal.signal(signal.SIGTERM, lambda *_: os._exit(1))
    checkpointer = Checkpointer.from_env()
    assert checkpointer.config.directory is not None
    run_id = os.environ.get("PET_RDZV_ID", "run")
    folder = Path(checkpointer.config.directory) / f".rendezvous-{run_id}"
    world_size = int(os.environ["WORLD_SIZE"])
    rendezvous = Rendezvous(
        folder, int(os.environ["WORKER_RANK"]), world_size, os.environ.get("HOSTNAME", "")
    )
    while True:
        train_round(checkpointer, rendezvous, run_id, rendezvous.join())


if __name__ == "__main__":
    sys.exit(main())
