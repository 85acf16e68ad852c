"""The programs the twin runs, as scripts/install-kubernetes builds them into ``.kubernetes/bin``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from together_clusters.errors import BinariesMissing

# The project root: emulator/kubernetes/binaries.py -> ../../..
_ROOT = Path(__file__).resolve().parents[2]
BIN_ENV = "TWIN_KUBERNETES_BIN"
"""Environment variable naming another folder holding ``kubernetes``, ``kwok`` and the JobSet files."""
DEFAULT_BIN = _ROOT / ".kubernetes" / "bin"


@dataclass(frozen=True)
class Binaries:
    """The multi-call control plane binary (etcd, kube-apiserver, ... by first argument), kwok, and beside
    them the JobSet controller manager with the pinned JobSet's CRD and ClusterRole."""

    kubernetes: Path
    kwok: Path

    @property
    def kubectl(self) -> Path:
        """A ``kubectl`` beside the multi-call binary (a symlink to it)."""
        return self.kubernetes.parent / "kubectl"

    @property
    def jobset(self) -> Path:
        return self.kubernetes.parent / "jobset"

    @property
    def jobset_crd(self) -> Path:
        return self.kubernetes.parent / "jobset-crd.yaml"

    @property
    def jobset_role(self) -> Path:
        return self.kubernetes.parent / "jobset-role.yaml"

    def versions(self) -> dict[str, str]:
        """The module version each controller binary was built from (``<binary>.version`` beside it, written
        by scripts/install-kubernetes): which release images the twin can run as them."""
        found = {}
        for path in self.kubernetes.parent.glob("*.version"):
            found[path.stem] = path.read_text().strip()
        return found

    def has_jobset(self) -> bool:
        return os.access(self.jobset, os.X_OK) and self.jobset_crd.is_file() and self.jobset_role.is_file()


def bin_dir() -> Path:
    """Where the binaries are looked for."""
    return Path(os.environ.get(BIN_ENV) or DEFAULT_BIN)


def charts_dir() -> Path:
    """The pinned controllers' Helm charts, beside the binaries (``<name>/Chart.yaml``; copied from their Go
    modules by scripts/install-kubernetes): a chart source for ``ClusterControllers`` with nothing fetched."""
    return bin_dir().parent / "charts"


def find() -> Binaries | None:
    """The built binaries, or ``None`` when either is missing."""
    directory = bin_dir()
    found = Binaries(kubernetes=directory / "kubernetes", kwok=directory / "kwok")
    if all(os.access(p, os.X_OK) for p in (found.kubernetes, found.kwok)):
        return found
    return None


def _how_to_build() -> str:
    """How to get the binaries: the checkout's script, or (an installed wheel has no scripts/) a checkout's."""
    if (_ROOT / "scripts" / "install-kubernetes").is_file():
        return f"run scripts/install-kubernetes (a cold build takes about 15 minutes), or set {BIN_ENV}"
    return (
        f"set {BIN_ENV} to a folder holding them, built by scripts/install-kubernetes in a checkout of the "
        "repository (into its .kubernetes/bin; a cold build takes about 15 minutes)"
    )


def require(jobset: bool = False) -> Binaries:
    """The built binaries (with JobSet's when ``jobset``); a clear error naming the fix when they are missing."""
    found = find()
    if found is None:
        raise BinariesMissing(
            f"the Kubernetes twin needs kubernetes and kwok in {bin_dir()}: {_how_to_build()}; "
            "or run the emulator with --no-kubernetes"
        )
    if jobset and not found.has_jobset():
        raise BinariesMissing(
            f"the Kubernetes twin's JobSet controller is not built in {bin_dir()} (jobset, jobset-crd.yaml, "
            f"jobset-role.yaml): {_how_to_build()}; or run the emulator with --no-jobset"
        )
    return found
