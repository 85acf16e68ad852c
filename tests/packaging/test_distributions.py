"""What ``python -m build`` makes: an sdist and a wheel that hold every file of the package once, as a real
file (pyproject.toml's ``package-dir`` maps the repository's top-level folders into ``together_clusters``), the
``py.typed`` marker, the ``pulumi new`` templates, the ``together-clusters`` command, and a semantic version
the changelog documents.
"""

from __future__ import annotations

import email.parser
import os
import re
import stat
import tarfile
import tomllib
import zipfile
from collections import Counter
from pathlib import Path

import yaml
from packaging.requirements import Requirement

from tests import _engine

from .conftest import Distributions

ROOT = _engine.ROOT
# https://semver.org/#is-there-a-suggested-regular-expression-regex-to-check-a-semver-string, without build metadata
# (a Python version cannot carry it).
SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-?((?:a|b|rc)(?:0|[1-9]\d*)))?$")
TEMPLATES = ("cluster", "finetune", "sweep")


def package_dirs(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, Path]:
    """pyproject.toml's ``package-dir``: each mapped package and the folder that holds it."""
    mapping = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["package-dir"]
    return {package: pyproject.parent / folder for package, folder in mapping.items()}


def source_files() -> set[str]:
    """Every file of the package in the checkout, as the ``together_clusters/...`` paths the wheel holds them at."""
    files = set()
    for package, top in package_dirs().items():
        prefix = package.replace(".", "/")
        for folder, subfolders, names in os.walk(top):
            subfolders[:] = [s for s in subfolders if s != "__pycache__"]
            files |= {f"{prefix}/{Path(folder, n).relative_to(top)}" for n in names}
    return files


def wheel_members(wheel: Path) -> list[zipfile.ZipInfo]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.infolist()


def sdist_members(sdist: Path) -> list[tarfile.TarInfo]:
    with tarfile.open(sdist) as archive:
        return archive.getmembers()


def wheel_metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(archive.read(name).decode())


def test_wheel_holds_every_package_file_once_as_a_real_file(distributions: Distributions) -> None:
    members = wheel_members(distributions.wheel)
    names = [m.filename for m in members]
    assert [n for n, count in Counter(names).items() if count > 1] == []
    links = [m.filename for m in members if stat.S_ISLNK(m.external_attr >> 16)]
    assert links == []
    package = {n for n in names if not n.startswith("together_gpu_clusters-")}
    assert package == source_files()
    assert "together_clusters/py.typed" in package
    assert "together_clusters/provider/resource.py" in package
    assert {f"together_clusters/templates/{t}/Pulumi.yaml" for t in TEMPLATES} <= package


def test_sdist_holds_every_package_file_once_as_a_real_file(distributions: Distributions) -> None:
    members = sdist_members(distributions.sdist)
    names = [m.name for m in members]
    assert [n for n, count in Counter(names).items() if count > 1] == []
    assert [m.name for m in members if not (m.isfile() or m.isdir())] == []
    (top,) = {n.split("/")[0] for n in names}
    files = {n.removeprefix(f"{top}/") for m, n in zip(members, names, strict=True) if m.isfile()}
    mapped = {f"{p.replace('.', '/')}/": f"{d.relative_to(ROOT)}/" for p, d in package_dirs().items()}
    shipped = set()
    for name in source_files():
        package = max((p for p in mapped if name.startswith(p)), key=len)
        shipped.add(mapped[package] + name.removeprefix(package))
    assert {f for f in files if f.split("/")[0] in {m.rstrip("/") for m in mapped.values()}} == shipped
    # The sdist keeps the repository's folders (package-dir maps them again when the wheel is built from it).
    folders = {str(d.relative_to(ROOT)) for d in package_dirs().values()}
    assert {f.split("/")[0] for f in files} == folders | {
        "together_gpu_clusters.egg-info",
        "PKG-INFO",
        "README.md",
        "CHANGELOG.md",
        "MANIFEST.in",
        "pyproject.toml",
        "setup.cfg",
    }


def test_version_is_semantic_and_in_the_changelog(distributions: Distributions) -> None:
    version = wheel_metadata(distributions.wheel)["Version"]
    assert SEMVER.match(version), version
    assert distributions.wheel.name.startswith(f"together_gpu_clusters-{version}-")
    changelog = (ROOT / "CHANGELOG.md").read_text()
    released = re.findall(r"(?m)^## \[(\d[^\]]*)\] - \d{4}-\d{2}-\d{2}$", changelog)
    assert released and released[0] == version, "the newest changelog entry is the package's version"


def test_command_and_typing_are_declared(distributions: Distributions) -> None:
    with zipfile.ZipFile(distributions.wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")]
        entry_points = archive.read(name).decode()
    assert re.search(r"(?m)^together-clusters = together_clusters\.cli\.main:main$", entry_points)
    assert "Typing :: Typed" in wheel_metadata(distributions.wheel).get_all("Classifier", [])


def test_templates_follow_pulumi_conventions_and_require_this_version(distributions: Distributions) -> None:
    version = wheel_metadata(distributions.wheel)["Version"]
    for name in TEMPLATES:
        folder = ROOT / "templates" / name
        project = yaml.safe_load((folder / "Pulumi.yaml").read_text())
        assert project["name"] == "${PROJECT}" and project["description"] == "${DESCRIPTION}"
        assert project["runtime"]["name"] == "python"
        assert project["template"]["description"]
        program = (folder / "__main__.py").read_text()
        prompts = project["template"]["config"]
        for key, prompt in prompts.items():
            assert prompt.get("description"), f"{name}: config prompt {key} has no description"
        # A key the program requires must have a default: `pulumi new --yes` then gives a stack that deploys.
        for key in re.findall(r'config\.require(?:_int|_float|_bool)?\("([^"]+)"\)', program):
            assert prompts.get(key, {}).get("default") not in (None, ""), f"{name}: {key} has no default"
        (requirement,) = (folder / "requirements.txt").read_text().split()
        requirement_spec = Requirement(requirement)
        assert requirement_spec.name == "together-gpu-clusters"
        assert requirement_spec.specifier.contains(version), f"{name}: {requirement} excludes {version}"
