"""The command's own errors: exit 1 and the cause on one line, before any engine runs."""

from __future__ import annotations

import json

import pytest

from together_clusters.cli.main import main


def test_a_directory_without_a_project_is_an_error_naming_it(tmp_path, capsys):
    assert main(["drift", "--stack", "dev", "--cwd", str(tmp_path), "--json"]) == 1
    out, err = capsys.readouterr()
    [line] = err.splitlines()
    assert (
        line
        == f"together-clusters drift: error: no Pulumi.yaml in {tmp_path}: give --cwd the project directory"
    )
    assert json.loads(out) == {"exit_code": 1, "error": line.split("error: ", 1)[1]}


def test_a_pulumi_that_cannot_run_is_an_error(tmp_path, capsys):
    (tmp_path / "Pulumi.yaml").write_text("name: p\nruntime: python\n")
    missing = tmp_path / "nowhere" / "bin" / "pulumi"
    assert main(["drift", "--stack", "dev", "--cwd", str(tmp_path), "--pulumi", str(missing)]) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"together-clusters drift: error: cannot run the pulumi CLI from {missing}:")


@pytest.mark.parametrize(
    "argv",
    [
        ["drift", "--stack", "a", "--all-stacks"],
        ["drift", "--stack", "a", "--jobs", "0"],
        ["status", "--stack", "a", "--price-per-gpu-hour", "-1"],
    ],
)
def test_bad_arguments_exit_1_not_2_which_means_drift(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 1
    assert "error:" in capsys.readouterr().err
