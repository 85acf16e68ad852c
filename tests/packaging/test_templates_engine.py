"""A user's own Pulumi project, as the README tells a user to make one: the package installed from the wheel
into a virtualenv of its own (not the repository's), a project made from each template with ``pulumi new``
from the template's local path, a ``provider.py``, ``components/`` and ``drift.py`` of the user's own beside
``__main__.py``, then ``pulumi up``, ``refresh``, ``preview --expect-no-changes`` and ``destroy`` against
the emulator that the same wheel installed.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests import _engine
from together_clusters.emulator.admin_client import AdminClient

from .conftest import InstalledVenv, clean_env

pytestmark = pytest.mark.engine

API_KEY = "user-project-key"
STACK = "dev"

# Modules of the user's own whose names are those of the package's subpackages: neither may shadow the other.
USER_FILES = {
    "provider.py": 'NAME = "the user\'s provider.py"\n',
    "components/__init__.py": 'NAME = "the user\'s components/"\n',
    "drift.py": 'NAME = "the user\'s drift.py"\n',
}
USER_PROGRAM = """
import components
import drift
import provider
import together_clusters
from pulumi.dynamic import CreateResult, Resource, ResourceProvider


class HostProbe(ResourceProvider):
    # Runs in the process that serves the project's dynamic providers, Cluster's included.
    def create(self, props):
        with open("/proc/self/cmdline", "rb") as cmdline:
            argv = cmdline.read().decode().split("\\0")
        return CreateResult("host-probe", {"host_argv": argv})


class HostProbeResource(Resource):
    host_argv: pulumi.Output[list]

    def __init__(self, name):
        super().__init__(HostProbe(), name, {"host_argv": None})


pulumi.export("user_modules", [provider.NAME, components.NAME, drift.NAME])
pulumi.export("package_location", together_clusters.__file__)
pulumi.export("dynamic_provider_host", HostProbeResource("host-probe").host_argv)
"""


@dataclass(frozen=True)
class Emulator:
    base_url: str
    admin: AdminClient


@pytest.fixture(scope="session")
def engine() -> None:
    _engine.require_engine()


@pytest.fixture(scope="module")
def emulator(
    engine: None, installed: InstalledVenv, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Emulator]:
    """``python -m together_clusters.emulator`` of the installed wheel, its clock 600 times real time."""
    work = tmp_path_factory.mktemp("emulator")
    log = work / "emulator.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [installed.python, "-m", "together_clusters.emulator", "--port", "0", "--speed", "600"],
            cwd=work,
            env=clean_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    try:
        deadline = time.monotonic() + 120
        while not log.read_text().endswith("\n") and server.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        base_url = log.read_text().splitlines()[0] if log.read_text() else ""
        assert base_url.startswith("http://127.0.0.1:"), log.read_text()
        admin = AdminClient(base_url)
        yield Emulator(base_url, admin)
        admin.close()
    finally:
        server.terminate()
        server.wait(timeout=60)


class UserProject:
    """One project made by ``pulumi new`` in a temporary directory, with its own file backend."""

    def __init__(self, work: Path, template: str, installed: InstalledVenv, base_url: str) -> None:
        self.work = work
        self.dir = work / f"my-{template}"
        self.env = _engine.engine_env(
            work, extra={"TOGETHER_BASE_URL": base_url, "TOGETHER_API_KEY": API_KEY}
        )
        # Only the project's own runtime option may name the virtualenv (the variable, which scripts/pulumi
        # would otherwise set to the repository's .venv, names one that does not exist), and nothing of the
        # repository is on the path: the program and the dynamic provider import the installed wheel or fail.
        self.env["PULUMI_RUNTIME_VIRTUALENV"] = str(work / "no-such-venv")
        self.env.pop("PYTHONPATH", None)
        self.env["PATH"] = f"{_engine.ROOT / '.engine' / 'bin'}:{self.env['PATH']}"

    def pulumi(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return _engine.run_pulumi(list(args), cwd=cwd or self.dir, env=self.env)


def ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, _engine.output(proc)
    return proc


@pytest.mark.parametrize("template", ["cluster", "finetune", "sweep"])
def test_template_project_deploys_refreshes_and_destroys_with_the_installed_wheel(
    engine: None, template: str, installed: InstalledVenv, emulator: Emulator, tmp_path: Path
) -> None:
    project = UserProject(tmp_path, template, installed, emulator.base_url)
    source = ok(installed.run(installed.python, "-m", "together_clusters.templates", template, cwd=tmp_path))
    template_dir = Path(source.stdout.strip())
    # A clean copy of the installed template (pip compiled the installed one's __main__.py).
    [installed_template] = installed.path.glob(
        f"lib/python*/site-packages/together_clusters/templates/{template}"
    )
    assert (template_dir / "__main__.py").read_text() == (installed_template / "__main__.py").read_text()

    new = [
        "new",
        str(template_dir),
        "--dir",
        str(project.dir),
        "--stack",
        STACK,
        "--yes",
        "--non-interactive",
        "--runtime-options",
        f"virtualenv={installed.path}",
    ]
    rendered = tmp_path / "manifests"
    if template != "cluster":
        new += ["--config", f"renderYamlTo={rendered}"]
    ok(project.pulumi(*new, cwd=tmp_path))

    litter = [p.name for p in project.dir.rglob("*") if p.name == "__pycache__" or p.suffix == ".pyc"]
    assert litter == [], litter
    made = yaml.safe_load((project.dir / "Pulumi.yaml").read_text())
    assert made["name"] == f"my-{template}"
    assert "template" not in made
    assert made["runtime"]["options"]["virtualenv"] == str(installed.path)
    assert ok(project.pulumi("config", "get", "region")).stdout.strip() == "us-central-8"

    for name, text in USER_FILES.items():
        (project.dir / name).parent.mkdir(exist_ok=True)
        (project.dir / name).write_text(text)
    with (project.dir / "__main__.py").open("a") as program:
        program.write(USER_PROGRAM)

    try:
        ok(project.pulumi("up", *_engine.UP_FLAGS))
        outputs = _engine.stack_outputs(project.dir, project.env)
        assert outputs["user_modules"] == [text.split('"')[1] for text in USER_FILES.values()]
        assert Path(outputs["package_location"]).resolve().is_relative_to(installed.path.resolve())
        # The project's dynamic providers run in the package's host (a pool as large as the engine's
        # parallelism), not the SDK's 4-thread one, in the project's virtualenv.
        host_argv = outputs["dynamic_provider_host"]
        assert host_argv[1:4] == ["-u", "-m", "together_clusters.provider.host"], host_argv
        assert Path(host_argv[0]).parent.parent == installed.path, host_argv
        clusters = {c["cluster_id"]: c for c in emulator.admin.clusters()}
        assert clusters[outputs["cluster_id"]]["cluster_name"] == f"my-{template}-{STACK}"
        if template != "cluster":
            kinds = {
                doc["kind"]
                for p in rendered.rglob("*.yaml")
                for doc in yaml.safe_load_all(p.read_text())
                if doc
            }
            assert "PersistentVolumeClaim" in kinds and kinds & {"Job", "JobSet"}, kinds

        # Objects rendered to YAML are on no cluster: pulumi-kubernetes cannot read them back, so the refresh
        # leaves them out (as the templates tell users to); the preview that follows covers everything.
        rendered_only = () if template == "cluster" else ("--exclude", "**kubernetes:**")
        ok(project.pulumi("refresh", *_engine.UP_FLAGS, *rendered_only))
        preview = project.pulumi("preview", *_engine.PREVIEW_FLAGS, "--expect-no-changes")
        assert preview.returncode == 0, _engine.output(preview)

        if template == "cluster":
            # The drift check of the README's CI section, by the command the wheel installs.
            drift = subprocess.run(
                [
                    str(installed.bin("together-clusters")),
                    "drift",
                    "--stack",
                    STACK,
                    "--cwd",
                    str(project.dir),
                    "--json",
                ],
                cwd=tmp_path,
                env=project.env,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            assert drift.returncode == 0, drift.stdout + drift.stderr
            report = json.loads(drift.stdout)
            [stack] = report["stacks"]
            assert stack["stack"] == STACK and stack["in_sync"] is True, report

        ok(project.pulumi("destroy", *_engine.UP_FLAGS))
    finally:
        if _engine.stack_resources(project.dir, project.env):
            project.pulumi("destroy", *_engine.UP_FLAGS)
    assert _engine.stack_resources(project.dir, project.env) == []
    emulator.admin.advance(3600)
    assert outputs["cluster_id"] not in {c["cluster_id"] for c in emulator.admin.clusters()}
