"""Save, find and prune checkpoints so that each one is either complete or ignored.

A checkpoint is an entry named ``ckpt-<step>-<time>`` holding the caller's files and, written last,
``MANIFEST.json`` with every file's size and the BLAKE3 digest of each 4 MiB chunk of it (:mod:`.digests`).
An entry without a manifest is an interrupted write; an entry whose files do not match their checksums
is corrupt. Both are skipped.

Files stream: a save takes chunks and hashes them on every core while it writes them, and a checkpoint
may be far larger than the process's memory. There are two ways back:

- :meth:`Checkpointer.resume` (and :meth:`~Checkpointer.load_latest`) read each file once: the caller's
  loader gets streams that hand over a chunk only once its digest matches (:mod:`.verifying`), and a
  damaged chunk met while it loads voids what it loaded and the next older checkpoint is loaded instead.
- :meth:`Checkpointer.restore` (and :meth:`~Checkpointer.latest`) read and check every chunk of every
  file before they hand back anything: the checkpoint's files are whole on disk before the caller opens
  them, for readers that want a path (memory maps) rather than a stream. That is a second pass.

Manifests written before per-chunk digests (format 1: one sha256 per file) still restore, checked
against that sha256 before they are handed over, by either way.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, Any, Generic, TypeVar, cast

from .contract import BACKEND_FILESYSTEM, BACKEND_S3, SAVED_REPORT, RuntimeConfig, report, report_resumed
from .digests import WholeFileDigest, Written, expected_digest
from .hashing import check, size_problem
from .lease import Lease, LeaseStore
from .storage import Backend, FilesystemBackend, S3Backend, read_all
from .verifying import CorruptCheckpoint, ReadAhead, VerifyingReader

log = logging.getLogger(__name__)

MANIFEST = "MANIFEST.json"
ENTRY_PREFIX = "ckpt-"
FORMAT_VERSION = 2
READABLE_FORMATS = (1, FORMAT_VERSION)
"""Format 1 recorded one sha256 per file, format 2 the BLAKE3 digest of each chunk."""

FileData = bytes | Iterable[bytes]
"""A file's content: bytes, or an iterable of chunks for state too large to hold twice."""

T = TypeVar("T")


class VerifiedFiles(Mapping[str, bytes]):
    """A checkpoint's files as open streams that return only verified bytes; ``files[name]`` reads one
    whole."""

    def __init__(self, streams: Mapping[str, IO[bytes]], read_ahead: ReadAhead | None = None) -> None:
        self._streams = dict(streams)
        self._read_ahead = read_ahead

    def open(self, name: str) -> IO[bytes]:
        """The file as a stream from its start: read it in chunks to keep memory bounded."""
        stream = self._streams[name]
        stream.seek(0)
        return stream

    def __getitem__(self, name: str) -> bytes:
        return self.open(name).read()

    def __iter__(self) -> Iterator[str]:
        return iter(self._streams)

    def __len__(self) -> int:
        return len(self._streams)

    def close(self) -> None:
        for stream in self._streams.values():
            stream.close()
        if self._read_ahead is not None:
            self._read_ahead.close()

    @property
    def damage(self) -> str | None:
        """What was wrong with the first damaged chunk a stream met while it was read, or None."""
        for stream in self._streams.values():
            if isinstance(stream, VerifyingReader) and stream.damage is not None:
                return stream.damage
        return None


@dataclass(frozen=True)
class Checkpoint:
    """A complete, verified checkpoint. Close it (or use ``with``) when done reading its files."""

    name: str
    step: int
    files: VerifiedFiles
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def open(self, file_name: str) -> IO[bytes]:
        """One file as a stream from its start (see :meth:`VerifiedFiles.open`)."""
        return self.files.open(file_name)

    def close(self) -> None:
        self.files.close()

    def __enter__(self) -> Checkpoint:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@dataclass(frozen=True)
class Resumed(Generic[T]):
    """What :meth:`Checkpointer.resume` loaded: the loader's result and the checkpoint it came from."""

    name: str
    step: int
    metadata: Mapping[str, Any]
    state: T


def entry_name(step: int, created_ns: int) -> str:
    """The entry name for a checkpoint; names sort by step, then by creation time."""
    if step < 0:
        raise ValueError(f"checkpoint step must be >= 0, got {step}")
    return f"{ENTRY_PREFIX}{step:012d}-{created_ns:020d}"


def as_chunks(data: FileData) -> Iterable[bytes]:
    return (data,) if isinstance(data, bytes) else data


class Checkpointer:
    """Writes checkpoints atomically to a backend, reads back the newest good one, keeps the last N.

    With a ``lease_holder`` (CHECKPOINT_LEASE_HOLDER, set for the workloads of a FleetQueue), only the copy
    of the workload holding the location's lease commits, and only committed checkpoints are resumed from
    (:mod:`.lease`): a copy left running in a region its workload moved out of stops at its next save with
    CheckpointSuperseded, and never resumes.
    """

    def __init__(
        self,
        backend: Backend,
        keep: int = 3,
        config: RuntimeConfig | None = None,
        lease_holder: str | None = None,
    ) -> None:
        if keep < 1:
            raise ValueError(f"keep must be >= 1, got {keep}")
        self.backend = backend
        self.keep = keep
        self.config = config or RuntimeConfig(keep=keep)
        holder = lease_holder if lease_holder is not None else self.config.lease_holder
        self.lease: Lease | None = None
        if holder:
            if not isinstance(backend, LeaseStore):
                raise ValueError(
                    f"lease_holder={holder!r} needs a backend that keeps a lease (read_versioned, write_if); "
                    f"{backend!r} does not"
                )
            self.lease = Lease(backend, holder, keep, existing=self)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Checkpointer:
        """Build the backend the pod's environment describes (see :mod:`.contract`)."""
        config = RuntimeConfig.from_env(os.environ if environ is None else environ)
        backend: Backend
        if config.backend == BACKEND_FILESYSTEM:
            if not config.directory:
                raise ValueError("CHECKPOINT_DIR is not set: mount checkpoint storage on this container")
            backend = FilesystemBackend(config.directory)
        elif config.backend == BACKEND_S3:
            if not config.s3_bucket:
                raise ValueError("CHECKPOINT_S3_BUCKET is not set for the s3 checkpoint backend")
            backend = S3Backend(config.s3_bucket, config.s3_prefix, endpoint_url=config.s3_endpoint)
        else:
            raise ValueError(f"unknown CHECKPOINT_BACKEND {config.backend!r}: use filesystem or s3")
        return cls(backend, keep=config.keep, config=config)

    def claim(self) -> None:
        """Take the location's lease now rather than at the first read or write (no-op without a lease);
        CheckpointSuperseded if this copy lost it."""
        if self.lease is not None:
            self.lease.claim()

    def save(
        self, step: int, files: Mapping[str, FileData], metadata: Mapping[str, Any] | None = None
    ) -> str:
        """Write every file, then the manifest, then drop checkpoints beyond the last ``keep``."""
        name = self.write(step, files, metadata)
        log.info("saved checkpoint %s (step %d, %d files)", name, step, len(files))
        report(SAVED_REPORT.format(name=name, step=step))
        self.prune(just_saved=name)
        return name

    def write(
        self, step: int, files: Mapping[str, FileData], metadata: Mapping[str, Any] | None = None
    ) -> str:
        """Write every file, then the manifest, then commit it under the lease if there is one; no logging and
        no pruning (the SIGTERM path uses this). CheckpointSuperseded if another copy holds the lease: the
        entry is written but never counts."""
        if self.lease is not None and not self.lease.claimed:
            self.lease.claim()  # before writing anything: a superseded copy stops here
        name = entry_name(step, time.time_ns())
        recorded = {}
        for file_name, data in files.items():
            if file_name == MANIFEST:
                raise ValueError(f"{MANIFEST} is reserved")
            written = self.backend.write(name, file_name, as_chunks(data))
            recorded[file_name] = written.manifest_entry()
        manifest = {
            "format": FORMAT_VERSION,
            "step": step,
            "files": recorded,
            "metadata": dict(metadata or {}),
        }
        self.backend.write(name, MANIFEST, [json.dumps(manifest, sort_keys=True).encode()])
        if self.lease is not None:
            self.lease.commit(name)
        return name

    def _entries_newest_first(self) -> list[str]:
        return sorted((e for e in self.backend.entries() if e.startswith(ENTRY_PREFIX)), reverse=True)

    def candidates_newest_first(self) -> list[str]:
        """The entries a resume may read, newest first: under a lease, the committed ones in the order they
        were committed (claimed first); without one, every entry by name."""
        if self.lease is None:
            return self._entries_newest_first()
        return list(reversed(self.lease.claim().committed))

    def complete_oldest_first(self) -> list[str]:
        """The entries with a manifest, oldest first (complete, not necessarily intact): what a location's
        first lease commits."""
        return [name for name in reversed(self._entries_newest_first()) if self.has_manifest(name)]

    def _manifest(self, name: str) -> dict[str, Any] | None:
        try:
            raw = read_all(self.backend, name, MANIFEST)
        except FileNotFoundError:
            return None
        try:
            manifest = json.loads(raw)
        except ValueError as e:
            raise CorruptCheckpoint(f"unreadable manifest: {e}") from e
        if not isinstance(manifest, dict):
            raise CorruptCheckpoint(f"manifest is a JSON {type(manifest).__name__}, not an object")
        return manifest

    def load(self, name: str) -> Checkpoint | None:
        """Read and verify one checkpoint; None if it is incomplete; CorruptCheckpoint if it is bad."""
        return self._open(name, checked_first=True)

    def _open(self, name: str, checked_first: bool) -> Checkpoint | None:
        """Checkpoint ``name`` with its files checked before it is returned, or as they are read (sizes and
        presence checked now); None if it is incomplete; CorruptCheckpoint if it is bad."""
        manifest = self._manifest(name)
        if manifest is None:
            return None
        if manifest.get("format") not in READABLE_FORMATS:
            raise CorruptCheckpoint(
                f"manifest format {manifest.get('format')!r}, expected one of {READABLE_FORMATS}"
            )
        try:
            step = int(manifest["step"])
            expected_files = manifest["files"]
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptCheckpoint(f"malformed manifest: {e!r}") from e
        metadata = manifest.get("metadata") or {}
        if not isinstance(expected_files, Mapping) or not isinstance(metadata, Mapping):
            raise CorruptCheckpoint("malformed manifest: files and metadata must be JSON objects")
        streams: dict[str, IO[bytes]] = {}
        read_ahead = None if checked_first else ReadAhead()
        try:
            for file_name, expected in expected_files.items():
                if not isinstance(expected, Mapping):
                    raise CorruptCheckpoint(f"manifest entry of file {file_name!r} is not an object")
                if read_ahead is None:
                    streams[file_name] = self.open_verified(name, file_name, expected)
                else:
                    streams[file_name] = self._open_checked_on_read(name, file_name, expected, read_ahead)
        except BaseException:
            VerifiedFiles(streams, read_ahead).close()
            raise
        return Checkpoint(name=name, step=step, files=VerifiedFiles(streams, read_ahead), metadata=metadata)

    def open_verified(self, name: str, file_name: str, expected: Mapping[str, Any]) -> IO[bytes]:
        """A file of entry ``name`` as a stream from its start, once its size and every chunk's digest match
        the manifest entry ``expected``; CorruptCheckpoint naming the file, what the manifest says and
        what the file holds, otherwise."""
        digest, stream = self._open_stored(name, file_name, expected)
        return self._checked(stream, file_name, check, digest)

    def _open_checked_on_read(
        self, name: str, file_name: str, expected: Mapping[str, Any], read_ahead: ReadAhead
    ) -> IO[bytes]:
        """A file of entry ``name`` whose size matches ``expected``, as a stream that checks each chunk as
        it is read (a whole-file sha256 cannot be: those files are checked first)."""
        digest, stream = self._open_stored(name, file_name, expected)
        if not isinstance(digest, Written):
            return self._checked(stream, file_name, check, digest)
        self._checked(stream, file_name, size_problem, digest)
        # A BufferedIOBase is a binary stream; typeshed does not relate it to IO[bytes].
        return cast(IO[bytes], VerifyingReader(stream, digest, file_name, read_ahead))

    @staticmethod
    def _checked(
        stream: IO[bytes],
        file_name: str,
        problem_of: Callable[[IO[bytes], Written | WholeFileDigest], str | None],
        digest: Written | WholeFileDigest,
    ) -> IO[bytes]:
        """``stream`` back at its start if ``problem_of`` finds nothing wrong with it; else closed, and
        CorruptCheckpoint naming the file and the problem."""
        try:
            if (problem := problem_of(stream, digest)) is not None:
                raise CorruptCheckpoint(f"file {file_name!r} {problem}")
            stream.seek(0)
        except BaseException:
            stream.close()
            raise
        return stream

    def _open_stored(
        self, name: str, file_name: str, expected: Mapping[str, Any]
    ) -> tuple[Written | WholeFileDigest, IO[bytes]]:
        try:
            digest = expected_digest(expected)
        except ValueError as e:
            raise CorruptCheckpoint(f"manifest entry of file {file_name!r} is malformed: {e}") from e
        try:
            return digest, self.backend.open(name, file_name)
        except FileNotFoundError as e:
            raise CorruptCheckpoint(f"file {file_name!r} is missing") from e
        except ValueError as e:  # a name the backend refuses, e.g. "../x"
            raise CorruptCheckpoint(f"manifest lists an invalid file name {file_name!r}") from e

    def _complete_newest_first(self, checked_first: bool) -> Iterator[Checkpoint]:
        """Each complete checkpoint that opens (see :meth:`_open`), newest first; the others are skipped with
        a log line saying why. Opened one at a time, as the caller asks for the next."""
        for name in self.candidates_newest_first():
            try:
                checkpoint = self._open(name, checked_first)
            except CorruptCheckpoint as e:
                log.warning("skipping corrupt checkpoint %s: %s", name, e)
                continue
            if checkpoint is None:
                log.info("skipping incomplete checkpoint %s (no manifest)", name)
                continue
            yield checkpoint

    def latest(self) -> Checkpoint | None:
        """The newest complete checkpoint whose files match their checksums, or None."""
        return next(self._complete_newest_first(checked_first=True), None)

    def restore(self) -> Checkpoint | None:
        """The checkpoint to resume from when the environment asks to resume (CHECKPOINT_RESUME), its files
        checked whole before it is returned (:meth:`latest`); :meth:`resume` reads them once."""
        if not self.config.resume:
            return None
        checkpoint = self.latest()
        if checkpoint is not None:
            report_resumed(checkpoint.step, checkpoint.name)
        return checkpoint

    def load_latest(self, load: Callable[[Checkpoint], T]) -> Resumed[T] | None:
        """``load(checkpoint)`` of the newest complete checkpoint that reads back whole, or None if none does.

        Each file is read once: the streams ``load`` gets hand over a chunk only once its digest matches
        the manifest. If one does not, whatever ``load`` did (raise the CorruptCheckpoint, wrap it in an
        error of its own, or swallow it and return), its result is dropped with a warning and the next
        older checkpoint is loaded. An error of ``load``'s own, with no damage met, is raised.
        """
        for checkpoint in self._complete_newest_first(checked_first=False):
            with checkpoint:
                try:
                    state = load(checkpoint)
                except Exception:
                    if checkpoint.files.damage is None:
                        raise
                damage = checkpoint.files.damage
            if damage is not None:
                log.warning("skipping corrupt checkpoint %s: %s", checkpoint.name, damage)
                continue
            return Resumed(
                name=checkpoint.name, step=checkpoint.step, metadata=checkpoint.metadata, state=state
            )
        return None

    def resume(self, load: Callable[[Checkpoint], T]) -> Resumed[T] | None:
        """When the environment asks to resume (CHECKPOINT_RESUME): :meth:`load_latest`, reported on stderr
        for drills (``resumed step=<n>``). Reads each file once, where :meth:`restore` reads it twice."""
        if not self.config.resume:
            return None
        resumed = self.load_latest(load)
        if resumed is not None:
            report_resumed(resumed.step, resumed.name)
        return resumed

    def prune(self, just_saved: str | None = None) -> None:
        """Keep the newest ``keep`` checkpoints that have a manifest; drop older ones, abandoned writes and
        what killed deletions left behind. Runs after a save, never on the SIGTERM path.

        ``just_saved`` is always kept and counts towards ``keep``, even when older entries sort after it
        (a run restarted at a lower step, or a newer entry that is corrupt): otherwise a save could
        delete the very checkpoint it wrote.
        """
        self.backend.sweep()
        if self.lease is not None:
            self._prune_under_lease(just_saved)
            return
        kept = 0 if just_saved is None else 1
        seen_complete = False
        for name in self._entries_newest_first():
            if name == just_saved:
                seen_complete = True
                continue
            complete = self.has_manifest(name)
            if complete:
                seen_complete = True
                if kept < self.keep:
                    kept += 1
                    continue
                self.backend.delete(name)
            elif seen_complete:
                # Without a manifest and older than a complete checkpoint: a write that died. A newer one
                # may still be in progress, so it stays.
                self.backend.delete(name)

    def _prune_under_lease(self, just_saved: str | None) -> None:
        """Under a lease the committed entries are the ones kept (the lease holds the newest ``keep``); an
        entry outside it is dropped when it is complete (a superseded copy's save, or one committed past
        ``keep``) or older than the newest committed one (a write that died). Only the holder prunes."""
        assert self.lease is not None
        state = self.lease.current()
        if state is None or state.holder != self.lease.holder:
            return
        committed = set(state.committed)
        newest = max(committed, default="")
        for name in self._entries_newest_first():
            if name in committed or name == just_saved:
                continue
            if name < newest or self.has_manifest(name):
                self.backend.delete(name)

    def has_manifest(self, name: str) -> bool:
        """Whether entry ``name`` has its manifest (written last: the entry is complete, not yet verified)."""
        try:
            self.backend.open(name, MANIFEST).close()
        except FileNotFoundError:
            return False
        return True
