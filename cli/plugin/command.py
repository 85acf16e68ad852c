"""``together-clusters plugin install``: the plugin ``together`` into Pulumi's plugin cache.

The plugin is the launcher ``pulumi-resource-together`` shipped in the wheel (``provider/native/plugin``),
which starts ``python -m together_clusters.provider.native``. A program in any language finds a plugin in
``Pulumi.yaml``'s ``plugins.providers``, in the plugin cache, or on ``PATH``: this command fills the cache, as
``pulumi plugin install resource together VERSION --file DIR`` does, from a copy of the launcher that names
the Python running this command (the one with this package), so a YAML or TypeScript program needs no
virtualenv of its own.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from together_clusters.provider import native

from ..arguments import version
from ..exit_codes import ExitCode
from ..workspace import EngineError

PLUGIN_NAME = "together"
LAUNCHER = "pulumi-resource-together"
PLUGIN_DIR = Path(native.__file__).resolve().parent / "plugin"
"""The launcher as the wheel ships it."""


def add_parser(sub: Any) -> None:
    """Register ``together-clusters plugin install``."""
    plugin = sub.add_parser(
        "plugin",
        help="install the native provider plugin together, for Pulumi programs in any language",
        description="install: put the provider plugin together (resources together:index:Cluster and "
        "together:index:Volume) into Pulumi's plugin cache at this package's version, started with the Python "
        "running this command, so that a program in any language (YAML, TypeScript, Go, Python) finds it as it "
        "finds any provider. Runs pulumi plugin install resource together VERSION --file DIR. "
        f"Exit {ExitCode.OK:d} installed, {ExitCode.ERROR:d} error.",
    )
    plugin.add_argument("action", choices=["install"], help="what to do with the plugin")
    plugin.add_argument(
        "--pulumi", type=Path, default=None, help="the pulumi executable (default: pulumi on PATH)"
    )
    plugin.add_argument("--json", action="store_true", help="print JSON for machines instead of text")


def launcher_text(python: str) -> str:
    """The shipped launcher with ``python`` written in as the interpreter that has the package."""
    text = (PLUGIN_DIR / LAUNCHER).read_text()
    line = 'installed_python=""'
    if line not in text:
        raise EngineError(f"{PLUGIN_DIR / LAUNCHER} has no {line} line to write the interpreter into")
    return text.replace(line, f"installed_python={shlex.quote(python)}", 1)


def install(pulumi: str, plugin_version: str, python: str = sys.executable) -> None:
    """``pulumi plugin install resource together VERSION --file DIR``, DIR holding the launcher for ``python``."""
    with tempfile.TemporaryDirectory(prefix="together-plugin-") as folder:
        launcher = Path(folder) / LAUNCHER
        launcher.write_text(launcher_text(python))
        launcher.chmod(0o755)
        done = subprocess.run(
            [
                pulumi,
                "plugin",
                "install",
                "resource",
                PLUGIN_NAME,
                plugin_version,
                "--file",
                folder,
                "--reinstall",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        said = " ".join((done.stderr or done.stdout).split())
        raise EngineError(f"pulumi plugin install failed (exit {done.returncode}): {said}")


def run(args: Any) -> ExitCode:
    """Install the plugin at the distribution's version; print where it went."""
    pulumi = str(args.pulumi) if args.pulumi is not None else shutil.which("pulumi")
    if pulumi is None:
        raise EngineError("no pulumi on PATH: install the Pulumi CLI or give --pulumi PATH")
    plugin_version = version()
    if not plugin_version[:1].isdigit():
        raise EngineError(
            f"this package is not installed ({plugin_version}): pip install together-gpu-clusters"
        )
    install(pulumi, plugin_version)
    if args.json:
        print(
            json.dumps({"exit_code": ExitCode.OK, "plugin": PLUGIN_NAME, "version": plugin_version}, indent=2)
        )
    else:
        print(
            f"installed the Pulumi plugin {PLUGIN_NAME} {plugin_version} (resource), run by {sys.executable}"
        )
    return ExitCode.OK
