"""The templates as ``python -m together_clusters.templates`` hands them out: a folder for ``pulumi new``
without build litter, a plain-text listing, and the finetune/sweep programs refusing, at preview and on one
line, a kubeconfig whose API server cannot exist (the emulator without its Kubernetes twin)."""

from __future__ import annotations

import py_compile
import shutil
from pathlib import Path

import pytest

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
    assert files == [".gitignore", "Pulumi.yaml", "__main__.py", "requirements.txt"]
    assert (printed / "__main__.py").read_text() == (template_with_litter / "__main__.py").read_text()
    # Asked again (an upgrade changed the template), the copy is made afresh.
    (template_with_litter / "__main__.py").write_text("# changed\n")
    assert main(["finetune"]) == 0
    assert (Path(capsys.readouterr().out.strip()) / "__main__.py").read_text() == "# changed\n"


def test_an_unknown_template_is_one_line_naming_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nope"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "no template named 'nope'" in line and "finetune" in line


def test_the_listing_is_plain_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["cluster", "finetune", "sweep"]
    assert not any(mark in line for line in lines for mark in ("``", "**", ":class:"))
