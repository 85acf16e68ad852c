"""The commands a user runs after ``pip install together-gpu-clusters``, from the installed wheel."""

from __future__ import annotations

import os
from importlib import metadata
from pathlib import Path

from .conftest import InstalledVenv

TEMPLATES = ("cluster", "finetune", "sweep")


def test_templates_are_listed_and_found_in_the_installed_package(
    installed: InstalledVenv, tmp_path: Path
) -> None:
    listing = installed.run(installed.python, "-m", "together_clusters.templates", cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    assert [line.split()[0] for line in listing.stdout.splitlines()] == list(TEMPLATES)
    for name in TEMPLATES:
        found = installed.run(installed.python, "-m", "together_clusters.templates", name, cwd=tmp_path)
        folder = Path(found.stdout.strip())
        # A clean copy of the installed template: its files, not the __pycache__/ pip compiled beside them.
        [source] = installed.path.glob(f"lib/python*/site-packages/together_clusters/templates/{name}")
        assert (source / "__pycache__").is_dir()
        assert {p.name for p in folder.iterdir()} == {
            "Pulumi.yaml",
            "__main__.py",
            "requirements.txt",
            ".gitignore",
            "pulumi-plugin",
        }
        # The launcher of the package's dynamic-provider host, from the installed package, executable.
        launcher = folder / "pulumi-plugin" / "pulumi-resource-pulumi-python"
        [installed_launcher] = installed.path.glob(
            "lib/python*/site-packages/together_clusters/provider/plugin/pulumi-resource-pulumi-python"
        )
        assert launcher.read_text() == installed_launcher.read_text()
        assert os.access(launcher, os.X_OK)
        assert (folder / "__main__.py").read_text() == (source / "__main__.py").read_text()

    unknown = installed.run(installed.python, "-m", "together_clusters.templates", "finetuning", cwd=tmp_path)
    assert unknown.returncode == 2
    assert "no template named 'finetuning'" in unknown.stderr and "cluster, finetune, sweep" in unknown.stderr


def test_the_command_and_the_emulator_come_with_the_wheel(installed: InstalledVenv, tmp_path: Path) -> None:
    command = installed.run(installed.bin("together-clusters"), "--help", cwd=tmp_path)
    assert command.returncode == 0, command.stderr
    assert "drift" in command.stdout and "status" in command.stdout
    emulator = installed.run(installed.python, "-m", "together_clusters.emulator", "--help", cwd=tmp_path)
    assert emulator.returncode == 0, emulator.stderr
    assert "--speed" in emulator.stdout


def test_the_package_schema_comes_with_the_wheel_and_matches_its_tables(
    installed: InstalledVenv, tmp_path: Path
) -> None:
    # What the plugin will serve and SDK generators read: shipped, and in step with the installed code.
    check = installed.run(
        installed.python, "-m", "together_clusters.provider.package_schema", "--check", cwd=tmp_path
    )
    assert check.returncode == 0, check.stderr
    [schema] = installed.path.glob("lib/python*/site-packages/together_clusters/provider/schema.json")
    assert '"together:index:Cluster"' in schema.read_text()


def test_the_native_plugin_comes_with_the_wheel_and_serves_its_schema(
    installed: InstalledVenv, tmp_path: Path
) -> None:
    # The launcher Pulumi.yaml's plugins.providers names (or plugin install copies), executable, and the
    # module it starts, which serves the schema with the package's version.
    [launcher] = installed.path.glob(
        "lib/python*/site-packages/together_clusters/provider/native/plugin/pulumi-resource-together"
    )
    assert os.access(launcher, os.X_OK)
    served = installed.run(
        installed.python,
        "-c",
        "import asyncio, json; from together_clusters.provider.native.provider import TogetherProvider; "
        "from pulumi.provider.experimental.provider import GetSchemaRequest; "
        "print(json.loads(asyncio.run(TogetherProvider().get_schema(GetSchemaRequest(0))).schema)['version'])",
        cwd=tmp_path,
    )
    assert served.returncode == 0, served.stderr
    assert served.stdout.strip() == metadata.version("together-gpu-clusters")
    command = installed.run(installed.bin("together-clusters"), "plugin", "--help", cwd=tmp_path)
    assert command.returncode == 0 and "install" in command.stdout
