"""Where checkpoint files live: a directory on the shared volume, or an S3-compatible bucket.

A backend stores named files inside named entries (one entry per checkpoint) and writes each file
durably before returning, so that whatever the caller writes afterwards (the manifest) is only
visible once everything before it is. Files stream in both directions: memory stays bounded by a
chunk (S3: a multipart part per transfer thread), whatever the checkpoint's size.
"""

from __future__ import annotations

import importlib
import io
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any, Protocol

from .digests import Written
from .errors import S3ExtraMissing
from .hashing import ChunkHasher
from .lease import exclusive_lock, file_tag
from .threads import start_in

CHUNK_BYTES = 8 * 1024 * 1024
"""The multipart part size of S3 uploads (boto3's default) and their read buffer."""

DOWNLOAD_PART_BYTES = 64 * 1024 * 1024
"""The size of each ranged GET of an S3 download (boto3's default is CHUNK_BYTES).

Every ranged GET is a request of its own, and some S3-compatible servers pay for each one far more than
its bytes: moto copies the whole object per ranged GET, so restoring 256 MiB took 5.3 s in 8 MiB ranges,
0.98 s in 64 MiB ones, and 1.01 s as one streamed GET. Memory does not grow with it (s3transfer streams
each range to the file in 256 KiB pieces), and 4 threads still share any file above 192 MiB. s5cmd
downloads in 50 MB parts by default, for the same reasons."""

WRITE_BEHIND_BYTES = 64 * 1024 * 1024
"""A file being written is made durable and dropped from the page cache every this many bytes.

So a save dirties at most two windows of memory and keeps writing into pages it has just released,
instead of taking fresh page cache for every byte and leaving it all to the final fsync. On the
benchmark's VM (whose free memory goes back to its host: virtio-balloon free page reporting, the likely
cause) writing 1 GiB into fresh page cache took up to 2.6 s in write() alone; a save of 1 GiB took a
median 3.14 s without this and 1.06 s with it, against 0.87 s for a raw write + fsync. It also leaves
the workload's own page cache alone."""

DELETING_PREFIX = ".deleting-"
"""Entries being deleted are renamed to this prefix first; leftovers of a killed delete carry it."""


class Backend(Protocol):
    """Storage for checkpoint entries, each a flat set of named files."""

    def entries(self) -> list[str]:
        """Names of the entries present, complete or not, in no particular order."""
        ...

    def write(self, entry: str, name: str, chunks: Iterable[bytes]) -> Written:
        """Store a file durably; when this returns, the file survives a crash of this process. Returns its
        size and per-chunk digests, computed as it streams by."""
        ...

    def open(self, entry: str, name: str) -> IO[bytes]:
        """A readable binary stream of a file, positioned at its start; FileNotFoundError if absent."""
        ...

    def delete(self, entry: str) -> None:
        """Remove an entry and everything in it."""
        ...

    def sweep(self) -> None:
        """Finish deletions that a killed process left half done."""
        ...


def read_all(backend: Backend, entry: str, name: str) -> bytes:
    """A whole (small) file: manifests, test data."""
    with backend.open(entry, name) as f:
        return f.read()


def _check_name(name: str) -> str:
    if not name or name.startswith(".") or "/" in name or "\\" in name:
        raise ValueError(f"invalid checkpoint file or entry name: {name!r}")
    return name


def _drop_behind(fd: int, start: int, end: int) -> None:
    """Make bytes ``start`` to ``end`` of file ``fd`` durable, then drop them from the page cache."""
    os.fdatasync(fd)
    if hasattr(os, "posix_fadvise"):  # not on macOS
        os.posix_fadvise(fd, start, end - start, os.POSIX_FADV_DONTNEED)


class _WriteBehind:
    """Makes a file being written durable and drops it from the page cache, one window of
    WRITE_BEHIND_BYTES at a time, in a thread beside the writer; one window in flight at most."""

    def __init__(self, f: IO[bytes]) -> None:
        self._f = f
        self._durable = 0
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="checkpoint-sync")
        self._in_flight: Callable[[], Any] = lambda: None

    def __enter__(self) -> _WriteBehind:
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self._in_flight()
        finally:
            self._pool.shutdown()

    def wrote(self) -> None:
        """Called after each write: starts the next window once a whole one is written."""
        end = self._f.tell()
        if end - self._durable < WRITE_BEHIND_BYTES:
            return
        self._f.flush()
        self._in_flight()
        self._in_flight = start_in(self._pool, _drop_behind, self._f.fileno(), self._durable, end)
        self._durable = end


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FilesystemBackend:
    """Checkpoints as directories under ``root`` (the shared volume's mount).

    Each file is written to a hidden temporary name, fsynced, renamed into place and the
    directory fsynced, so a crash leaves either the whole file or only a hidden temporary.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"FilesystemBackend({str(self.root)!r})"

    def entries(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return [p.name for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(".")]

    def write(self, entry: str, name: str, chunks: Iterable[bytes]) -> Written:
        directory = self.root / _check_name(entry)
        if not directory.is_dir():
            directory.mkdir(parents=True, exist_ok=True)
            _fsync_dir(directory.parent)
        final = directory / _check_name(name)
        temporary = directory / f".{name}.tmp-{os.getpid()}"
        with ChunkHasher() as hasher, open(temporary, "wb") as f:
            with _WriteBehind(f) as behind:
                for chunk in hasher.hashed(chunks):
                    f.write(chunk)
                    behind.wrote()
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, final)
        _fsync_dir(directory)
        return hasher.written()

    def open(self, entry: str, name: str) -> IO[bytes]:
        return open(self.root / _check_name(entry) / _check_name(name), "rb")

    def delete(self, entry: str) -> None:
        directory = self.root / _check_name(entry)
        # Renamed out of sight first, so a reader never finds a manifest whose files are half removed.
        doomed = self.root / f"{DELETING_PREFIX}{entry}-{os.getpid()}"
        try:
            os.replace(directory, doomed)
        except FileNotFoundError:
            return
        shutil.rmtree(doomed, ignore_errors=True)

    def read_versioned(self, name: str) -> tuple[bytes, str] | None:
        try:
            data = (self.root / _check_name(name)).read_bytes()
        except FileNotFoundError:
            return None
        return data, file_tag(data)

    def write_if(self, name: str, data: bytes, expected_tag: str | None) -> bool:
        """Compare and swap under an exclusive lock on a hidden file beside it: whoever holds the lock reads,
        compares and renames the new content into place before the next one reads."""
        self.root.mkdir(parents=True, exist_ok=True)
        release = exclusive_lock(str(self.root / f".{_check_name(name)}.lock"))
        try:
            found = self.read_versioned(name)
            if (None if found is None else found[1]) != expected_tag:
                return False
            temporary = self.root / f".{name}.tmp-{os.getpid()}"
            with open(temporary, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(temporary, self.root / name)
            _fsync_dir(self.root)
            return True
        finally:
            release()

    def sweep(self) -> None:
        if not self.root.is_dir():
            return
        for leftover in self.root.iterdir():
            # Another pod may be removing the same leftover; whichever gets there first wins.
            if leftover.name.startswith(DELETING_PREFIX) and leftover.is_dir():
                shutil.rmtree(leftover, ignore_errors=True)


class _ChunkReader(io.RawIOBase):
    """A file-like view of chunks, for boto3 to read from."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._pending = bytes(chunk)
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


def _s3_module(name: str) -> Any:
    """Import ``name`` of boto3, deferred (only S3 users need boto3 in their image); without it, the error
    that names the extra to install."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        raise S3ExtraMissing((error.name or "boto3").partition(".")[0]) from error


def transfer_config(**overrides: Any) -> Any:
    """boto3's transfer settings: multipart above the threshold, parts of CHUNK_BYTES, bounded threads.

    Memory per upload is about ``multipart_chunksize * max_concurrency``: a stream that cannot seek (a
    checkpoint's chunks) is read into parts in memory, and s3transfer would otherwise keep up to ten of
    them (``max_in_memory_upload_chunks``), 80 MiB that a pod's memory limit may not have.
    """
    TransferConfig = _s3_module("boto3.s3.transfer").TransferConfig

    settings: dict[str, Any] = {
        "multipart_threshold": CHUNK_BYTES,
        "multipart_chunksize": CHUNK_BYTES,
        "max_concurrency": 4,
        **overrides,
    }
    in_memory_parts = settings.pop("max_in_memory_upload_chunks", settings["max_concurrency"])
    config = TransferConfig(**settings)
    # Not a TransferConfig keyword, but an attribute of s3transfer's config, which its manager reads.
    config.max_in_memory_upload_chunks = in_memory_parts
    return config


_MISSING = ("404", "NoSuchKey")
"""The error codes of a GET of a key that does not exist."""


def _error_code(error: Any) -> str | None:
    """The S3 error code of a botocore ClientError."""
    code: str | None = error.response.get("Error", {}).get("Code")
    return code


class S3Backend:
    """Checkpoints as key prefixes ``<prefix>/<entry>/`` in an S3-compatible bucket.

    Uploads and downloads go through boto3's transfer manager (``upload_fileobj``/``download_fileobj``):
    multipart above ``config.multipart_threshold``, so files past S3's 5 GiB single-PUT limit work. An
    object appears only when its upload completes, so each file is either fully there or absent.
    Downloads land in an anonymous temporary file under ``spool_dir`` (local disk, not memory), in ranged
    GETs of DOWNLOAD_PART_BYTES (``download_config`` overrides it; ``config`` is the uploads').
    Credentials come from boto3's usual sources (in a pod: the Secret-backed AWS_* variables).
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        endpoint_url: str | None = None,
        client: Any | None = None,
        region_name: str | None = None,
        config: Any | None = None,
        spool_dir: str | None = None,
        download_config: Any | None = None,
    ) -> None:
        if client is None:
            client = _s3_module("boto3").client("s3", endpoint_url=endpoint_url, region_name=region_name)
        self.client = client
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.config = config if config is not None else transfer_config()
        self.download_config = (
            download_config
            if download_config is not None
            else transfer_config(multipart_chunksize=DOWNLOAD_PART_BYTES)
        )
        self.spool_dir = spool_dir

    def __repr__(self) -> str:
        return f"S3Backend(bucket={self.bucket!r}, prefix={self.prefix!r})"

    def _base(self) -> str:
        return f"{self.prefix}/" if self.prefix else ""

    def _root_key(self, name: str) -> str:
        """The key of a file at the prefix itself, beside the entries (the lease)."""
        return f"{self._base()}{_check_name(name)}"

    def _key(self, entry: str, name: str) -> str:
        return f"{self._base()}{_check_name(entry)}/{_check_name(name)}"

    def entries(self) -> list[str]:
        base = self._base()
        names: list[str] = []
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=base, Delimiter="/"):
            for common in page.get("CommonPrefixes", []):
                names.append(common["Prefix"][len(base) :].rstrip("/"))
        return names

    def write(self, entry: str, name: str, chunks: Iterable[bytes]) -> Written:
        # One hashing thread: an upload is network-bound and one thread hashes far faster than it sends,
        # while each thread's stack counts against a capped process's memory (the transfer's own threads
        # and parts already take most of it).
        with ChunkHasher(threads=1) as hasher:
            reader = _ChunkReader(hasher.hashed(chunks))
            self.client.upload_fileobj(
                io.BufferedReader(reader, CHUNK_BYTES),
                self.bucket,
                self._key(entry, name),
                Config=self.config,
            )
        return hasher.written()

    def open(self, entry: str, name: str) -> IO[bytes]:
        from botocore.exceptions import ClientError

        key = self._key(entry, name)
        spool = tempfile.TemporaryFile(dir=self.spool_dir)
        try:
            self.client.download_fileobj(self.bucket, key, spool, Config=self.download_config)
        except ClientError as e:
            spool.close()
            if _error_code(e) in _MISSING:
                raise FileNotFoundError(key) from e
            raise
        except BaseException:
            spool.close()
            raise
        spool.seek(0)
        return spool

    def delete(self, entry: str) -> None:
        prefix = f"{self._base()}{_check_name(entry)}/"
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": keys, "Quiet": True})

    def read_versioned(self, name: str) -> tuple[bytes, str] | None:
        from botocore.exceptions import ClientError

        try:
            found = self.client.get_object(Bucket=self.bucket, Key=self._root_key(name))
        except ClientError as e:
            if _error_code(e) in _MISSING:
                return None
            raise
        return found["Body"].read(), found["ETag"]

    def write_if(self, name: str, data: bytes, expected_tag: str | None) -> bool:
        """A conditional PUT: ``If-Match`` the ETag read, or ``If-None-Match: *`` to create. S3 answers 412
        when the object changed (or appeared) since, and 409 when a concurrent conditional write to it is
        in flight: both are a lost round."""
        from botocore.exceptions import ClientError

        condition = {"IfNoneMatch": "*"} if expected_tag is None else {"IfMatch": expected_tag}
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._root_key(name), Body=data, **condition)
        except ClientError as e:
            if _error_code(e) in ("PreconditionFailed", "ConditionalRequestConflict"):
                return False
            raise
        return True

    def sweep(self) -> None:
        """Nothing to finish: objects are deleted outright, and an entry a killed delete left without
        its manifest is an incomplete write to :meth:`Checkpointer.prune`. Abandoned multipart uploads
        are the bucket's lifecycle rule's to expire (AbortIncompleteMultipartUpload)."""
