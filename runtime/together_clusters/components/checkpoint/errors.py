"""The errors the checkpoint runtime raises, defined here because training images install the runtime alone.

    CorruptCheckpoint (Exception)    a checkpoint's manifest and files disagree
    S3ExtraMissing (ImportError)     S3 checkpoints were asked for without boto3; names the pip install
    CheckpointSuperseded (Exception) another copy of the workload holds the checkpoint lease (.lease)

The main distribution's error tree (``together_clusters.errors``) re-exports them beside its own root:
they are not ``TogetherError``\\ s, since this distribution does not ship that tree. Standard library only.
"""

from __future__ import annotations


class CorruptCheckpoint(Exception):
    """A checkpoint's manifest or files do not agree."""


class S3ExtraMissing(ImportError):
    """S3 checkpoints need boto3, which the ``s3`` extra installs."""

    def __init__(self, module: str) -> None:
        super().__init__(
            f"S3 checkpoints need {module}, which is not installed: "
            "pip install 'together-gpu-checkpoint[s3]' (or 'together-gpu-clusters[s3]')",
            name=module,
        )


class CheckpointSuperseded(Exception):
    """Another copy of this workload holds the checkpoint lease: this copy's saves no longer count and it
    must not resume (the workload was moved to another cluster; see :mod:`.lease`)."""
