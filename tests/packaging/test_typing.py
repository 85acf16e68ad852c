"""A type checker sees the installed package's annotations (``py.typed``): mypy, run over a user's program in
a project of its own against the virtualenv the wheel is installed in, passes the correct program and reports
each wrong argument type of the resources and components, at its line.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from .conftest import InstalledVenv, clean_env

CORRECT = """\
import pulumi

from together_clusters.components import (
    BatchJob,
    BatchJobArgs,
    CheckpointStore,
    CheckpointStoreArgs,
    ContainerSpec,
    SharedVolume,
    Sweep,
    SweepArgs,
    provider_for,
)
from together_clusters.provider import Cluster, ClusterArgs

cluster = Cluster(
    "gpu",
    ClusterArgs(cluster_name="gpu", region="us-central-8", gpu_type="H100_SXM", num_gpus=8, num_preemptible_gpus=8),
)
kubernetes = provider_for(cluster, render_dir="out")
store = CheckpointStore(
    "checkpoints",
    CheckpointStoreArgs(storage=SharedVolume(claim_name="checkpoints", size="100Gi")),
    opts=pulumi.ResourceOptions(provider=kubernetes),
)
trainer = ContainerSpec(image="ghcr.io/example/trainer:latest", command=("python", "-m", "train"), gpus=8)
job = BatchJob("finetune", BatchJobArgs(container=trainer, checkpoint=store.storage))
sweep = Sweep("sweep", SweepArgs(container=trainer, trials=({"lr": 1e-5}, {"lr": 3e-5}), checkpoint=None))
gpus: pulumi.Output[int] = cluster.allocated_preemptible_gpus
"""

# Each line that must be reported ends with `# expect: <mypy error code>`.
WRONG = """\
import pulumi

from together_clusters.components import BatchJobArgs, ContainerSpec, SweepArgs, provider_for
from together_clusters.provider import Cluster, ClusterArgs

args = ClusterArgs(cluster_name="gpu", region="us-central-8", gpu_type="H100_SXM", num_gpus="eight")  # expect: arg-type
cluster = Cluster("gpu", {"num_gpus": 8})  # expect: arg-type
trainer = ContainerSpec(image="ghcr.io/example/trainer:latest", gpus="8")  # expect: arg-type
trainer.gpus = 4  # expect: misc
job = BatchJobArgs(container=trainer, checkpoint="/checkpoints")  # expect: arg-type
sweep = SweepArgs(container=trainer, trials=[{"lr": 1e-5}], checkpoint=None)  # expect: arg-type
kubernetes = provider_for(cluster, render_dir=3)  # expect: arg-type
count: pulumi.Output[str] = cluster.allocated_preemptible_gpus  # expect: assignment
"""

ERROR_LINE = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): error: .*\[(?P<code>[a-z-]+)\]$")


def run_mypy(project: Path, installed: InstalledVenv) -> subprocess.CompletedProcess[str]:
    """mypy (the repository's, from the test extra) over ``project`` with the installed virtualenv's packages."""
    (project / "mypy.ini").write_text("[mypy]\n")  # no settings of the repository's
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            "mypy.ini",
            "--python-executable",
            str(installed.python),
            "--cache-dir",
            str(project / ".mypy_cache"),
            "--show-error-codes",
            "--no-error-summary",
            "--no-pretty",
            "correct.py",
            "wrong.py",
        ],
        cwd=project,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def test_mypy_passes_a_correct_program_and_reports_each_wrong_argument(
    installed: InstalledVenv, tmp_path: Path
) -> None:
    (tmp_path / "correct.py").write_text(CORRECT)
    (tmp_path / "wrong.py").write_text(WRONG)
    proc = run_mypy(tmp_path, installed)
    output = proc.stdout + proc.stderr
    reported = set()
    for line in proc.stdout.splitlines():
        if ": note: " in line:
            continue
        match = ERROR_LINE.match(line)
        assert match, f"unexpected mypy output line: {line}\n{output}"
        reported.add((match["file"], int(match["line"]), match["code"]))
    expected = {
        ("wrong.py", number, code)
        for number, text in enumerate(WRONG.splitlines(), start=1)
        for code in re.findall(r"# expect: ([a-z-]+)$", text)
    }
    assert reported == expected, output
    assert proc.returncode == 1, output
