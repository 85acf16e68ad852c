"""Where checkpoint files live: a directory on the shared volume, or an S3-compatible bucket.

A backend stores named files inside named entries (one entry per checkpoint) and writes each file
durably before returning, so that whatever the caller writes afterwards (the manifest) is only
visible once everything before it is.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


@dataclass(frozen=True)
class Written:
    """What a backend wrote: the file's size and sha256."""

    size: int
    sha256: str


class Backend(Protocol):
    """Storage for checkpoint entries, each a flat set of named files."""

    def entries(self) -> list[str]:
        """Names of the entries present, complete or not, in no particular order."""
        ...

    def write(self, entry: str, name: str, chunks: Iterable[bytes]) -> Written:
        """Store a file durably; when this returns, the file survives a crash of this process."""
        ...

    def read(self, entry: str, name: str) -> bytes:
        """Return a file's bytes; raise FileNotFoundError if it is absent."""
        ...

    def delete(self, entry: str) -> None:
        """Remove an entry and everything in it."""
        ...


def _check_name(name: str) -> str:
    if not name or name.startswith(".") or "/" in name or "\\" in name:
        raise ValueError(f"invalid checkpoint file or entry name: {name!r}")
    return name


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
        digest = hashlib.sha256()
        size = 0
        with open(temporary, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
                digest.update(chunk)
                size += len(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, final)
        _fsync_dir(directory)
        return Written(size=size, sha256=digest.hexdigest())

    def read(self, entry: str, name: str) -> bytes:
        return (self.root / _check_name(entry) / _check_name(name)).read_bytes()

    def delete(self, entry: str) -> None:
        directory = self.root / _check_name(entry)
        # Renamed out of sight first, so a reader never finds a manifest whose files are half removed.
        doomed = self.root / f".deleting-{entry}-{os.getpid()}"
        try:
            os.replace(directory, doomed)
        except FileNotFoundError:
            return
        shutil.rmtree(doomed, ignore_errors=True)


class S3Backend:
    """Checkpoints as key prefixes ``<prefix>/<entry>/`` in an S3-compatible bucket.

    A PUT is atomic per object, so each file is either fully there or absent.
    Credentials come from boto3's usual sources (in a pod: the Secret-backed AWS_* variables).
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        endpoint_url: str | None = None,
        client: Any | None = None,
        region_name: str | None = None,
    ) -> None:
        if client is None:
            import boto3  # deferred: only S3 users need boto3 in their image

            client = boto3.client("s3", endpoint_url=endpoint_url, region_name=region_name)
        self.client = client
        self.bucket = bucket
        self.prefix = prefix.strip("/")

    def __repr__(self) -> str:
        return f"S3Backend(bucket={self.bucket!r}, prefix={self.prefix!r})"

    def _base(self) -> str:
        return f"{self.prefix}/" if self.prefix else ""

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
        data = b"".join(chunks)
        self.client.put_object(Bucket=self.bucket, Key=self._key(entry, name), Body=data)
        return Written(size=len(data), sha256=hashlib.sha256(data).hexdigest())

    def read(self, entry: str, name: str) -> bytes:
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=self._key(entry, name))
        except self.client.exceptions.NoSuchKey as e:
            raise FileNotFoundError(self._key(entry, name)) from e
        body: bytes = response["Body"].read()
        return body

    def delete(self, entry: str) -> None:
        prefix = f"{self._base()}{_check_name(entry)}/"
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": keys, "Quiet": True})
