"""The templates as ``python -m together_clusters.templates`` hands them out: a folder for ``pulumi new``
without build litter, a plain-text listing, and the finetune/sweep programs refusing, at preview and on one
line, a kubeconfig whose API server cannot exist (the emulator without its Kubernetes twin)."""

from __future__ import annotations

import json
import os
import py_compile
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

import together_clusters.templates as templates
from together_clusters.templates.__main__ import main


@pytest.fixture
def template_with_litter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The finetune template as an installed package has it: pip compiled its __main__.py."""
    folder = tmp_path / "site" / "finetune"
    shutil.copytree(
        templates.path("finetune"), folder, ignore=shutil.ignore_patterns(*templates.BUILD_LITTER)
    )
    py_compile.compile(
        str(folder / "__main__.py"), cfile=str(folder / "__pycache__" / "__main__.cpython-311.pyc")
    )
    (folder / "stray.pyc").write_bytes(b"")
    monkeypatch.setattr(templates, "DIRECTORY", folder.parent)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return folder


def test_the_printed_folder_has_no_build_litter(
    template_with_litter: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["finetune"]) == 0
    printed = Path(capsys.readouterr().out.strip())
    files = sorted(p.relative_to(printed).as_posix() for p in printed.rglob("*"))
    launcher = "pulumi-plugin/pulumi-resource-pulumi-python"
    assert files == [
        ".gitignore",
        "Pulumi.yaml",
        "__main__.py",
        "pulumi-plugin",
        launcher,
        "requirements.txt",
    ]
    assert (printed / "__main__.py").read_text() == (template_with_litter / "__main__.py").read_text()
    # Asked again (an upgrade changed the template), the copy is made afresh.
    (template_with_litter / "__main__.py").write_text("# changed\n")
    assert main(["finetune"]) == 0
    assert (Path(capsys.readouterr().out.strip()) / "__main__.py").read_text() == "# changed\n"


@pytest.mark.parametrize("name", templates.names())
def test_the_copy_of_a_template_carries_the_launcher_its_pulumi_yaml_names(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine refuses a Pulumi.yaml naming a missing plugin folder ("no folder at path"). No template
    holds one (the launcher's one home is provider/plugin/, and the repository holds no link to it): the copy
    that ``python -m together_clusters.templates NAME`` prints carries it, the same bytes, executable."""
    from together_clusters.provider.host import PLUGIN_DIR

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert not (templates.path(name) / templates.PLUGIN_FOLDER).exists()
    copy = templates.clean_copy(name)
    [plugin] = yaml.safe_load((copy / "Pulumi.yaml").read_text())["plugins"]["providers"]
    assert plugin["name"] == "pulumi-python" and plugin["path"] == templates.PLUGIN_FOLDER
    launcher = copy / plugin["path"] / "pulumi-resource-pulumi-python"
    assert launcher.read_bytes() == (PLUGIN_DIR / "pulumi-resource-pulumi-python").read_bytes()
    assert os.access(launcher, os.X_OK) and not launcher.is_symlink()


def test_an_unknown_template_is_one_line_naming_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nope"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "no template named 'nope'" in line and "finetune" in line


def test_the_listing_is_plain_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["cluster", "finetune", "sweep"]
    assert not any(mark in line for line in lines for mark in ("``", "**", ":class:"))


FINETUNE_CONFIG = {
    "region": "us-central-8",
    "gpuType": "H100_SXM",
    "numPreemptibleGpus": "8",
    "image": "i",
    "gpusPerPod": "8",
    "checkpointSize": "1Gi",
}


@contextmanager
def finetune_project(tmp_path: Path, **config: str) -> Iterator[tuple[Path, dict[str, str]]]:
    """The finetune template's program as a stack ``dev`` (selected) against an emulator without its twin;
    destroyed afterwards."""
    from tests import _engine
    from together_clusters.emulator.server import start_emulator

    _engine.require_engine()
    program = (templates.path("finetune") / "__main__.py").read_text()
    project = _engine.write_project(tmp_path / "ft", "ft", program)
    with start_emulator(speed=600) as emulator:
        env = _engine.engine_env(
            tmp_path,
            pythonpath=[_engine.ROOT],
            extra={"TOGETHER_BASE_URL": emulator.base_url, "TOGETHER_API_KEY": "k"},
        )
        _engine.run_pulumi(["stack", "init", "dev"], project, env, check=True)
        for key, value in {**FINETUNE_CONFIG, **config}.items():
            _engine.run_pulumi(["config", "set", key, value], project, env, check=True)
        try:
            yield project, env
        finally:
            _engine.run_pulumi(["destroy", *_engine.UP_FLAGS], project, env)


@pytest.mark.engine
def test_finetune_on_the_emulator_without_its_twin_fails_on_one_line_naming_the_ways_out(
    tmp_path: Path,
) -> None:
    """``pulumi up`` creates the cluster, then stops before the Kubernetes provider tries the placeholder
    host (was: "lookup ... no such host" and no hint); the next preview refuses at once, on one line."""
    from tests import _engine

    with finetune_project(tmp_path) as (project, env):
        up = _engine.run_pulumi(["up", *_engine.UP_FLAGS], project, env)
        preview = _engine.run_pulumi(["preview", *_engine.PREVIEW_FLAGS], project, env)
    for run in (up, preview):
        text = run.stdout + run.stderr
        assert run.returncode != 0, _engine.output(run)
        assert "no such host" not in text, _engine.output(run)
        lines = {ln.split("error: ", 1)[1] for ln in text.splitlines() if "never resolves" in ln}
        assert len(lines) == 1, _engine.output(run)
        [line] = lines
        assert "--kubernetes" in line and "renderYamlTo" in line, line
        assert "Traceback" not in text, _engine.output(run)


@pytest.mark.engine
def test_drift_of_a_finetune_rendered_to_yaml_checks_the_selected_stack_and_is_in_sync(
    tmp_path: Path,
) -> None:
    """The rendered objects are on no cluster: drift leaves them out (was: their refresh failed the whole
    preview and drift said "failed: stderr:"); without --stack it checks the selected stack."""
    from tests import _engine

    with finetune_project(tmp_path, renderYamlTo=str(tmp_path / "out")) as (project, env):
        _engine.run_pulumi(["up", *_engine.UP_FLAGS], project, env, check=True)
        pulumi = _engine.ROOT / ".engine" / "bin" / "pulumi"
        drift = subprocess.run(
            [sys.executable, "-m", "together_clusters.cli", "drift", "-C", str(project), "--json"]
            + ["--pulumi", str(pulumi)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    assert drift.returncode == 0, drift.stdout + drift.stderr
    [stack] = json.loads(drift.stdout)["stacks"]
    assert stack["stack"] == "dev" and stack["in_sync"] is True, stack


@pytest.mark.parametrize(
    ("kubeconfig", "unreachable"),
    [
        ("https://c-1.k8s.emulator.invalid", True),
        ("https://c-1.k8s.emulator.invalid.:6443", True),
        ("https://127.0.0.1:6443", False),
        ("https://api.example.com", False),
    ],
)
def test_a_kubeconfig_on_a_host_that_never_resolves_is_refused(kubeconfig: str, unreachable: bool) -> None:
    from together_clusters.components.kube import reachable, unreachable_server
    from together_clusters.errors import KubernetesUnreachable

    text = (
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: k, cluster: {{server: '{kubeconfig}'}}}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\nusers: [{name: u, user: {token: secret-token}}]\n"
    )
    assert (unreachable_server(text) == kubeconfig) is unreachable
    if not unreachable:
        assert reachable(text) == text
        return
    with pytest.raises(KubernetesUnreachable) as refused:
        reachable(text)
    message = str(refused.value)
    assert "\n" not in message and "--kubernetes" in message and "renderYamlTo" in message
    assert "secret-token" not in message


def test_from_a_wheel_missing_twin_binaries_name_the_variable_and_the_checkouts_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installed wheel has no scripts/: the error names TWIN_KUBERNETES_BIN and where the script is."""
    from together_clusters.emulator.kubernetes import binaries
    from together_clusters.errors import BinariesMissing

    monkeypatch.setattr(binaries, "_ROOT", tmp_path / "site-packages")
    monkeypatch.setattr(binaries, "DEFAULT_BIN", tmp_path / "site-packages" / ".kubernetes" / "bin")
    monkeypatch.delenv(binaries.BIN_ENV, raising=False)
    with pytest.raises(BinariesMissing) as missing:
        binaries.require()
    message = str(missing.value)
    assert "set TWIN_KUBERNETES_BIN to a folder holding them" in message
    assert "scripts/install-kubernetes in a checkout of the repository" in message
    assert "\n" not in message
