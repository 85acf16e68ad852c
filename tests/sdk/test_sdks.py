"""The generated SDKs (sdk/{nodejs,go,python}) are the schema's, and a program in each language type-checks on them.

What a TypeScript, Go or Python user of the together plugin relies on: the SDK in the repository is exactly what
tools/sdkgen makes of provider/schema.json today (a schema change without ``scripts/sdks generate`` fails here),
and a program using ``Cluster`` and ``Volume`` with typed args compiles against it, while a misspelt field or a
value of the wrong type does not. Needs Go and node (``scripts/sdks setup`` builds the generator and installs
tsc into the git-ignored .sdk-check/; warm, it does nothing).
"""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests import _engine

pytestmark = pytest.mark.engine

ROOT = _engine.ROOT
SDK = ROOT / "sdk"
SAMPLES = ROOT / "examples" / "sdk"
CHECK = ROOT / ".sdk-check"
SCRIPT = ROOT / "scripts" / "sdks"
LANGUAGES = ("nodejs", "go", "python")
TSC = CHECK / "node_modules" / ".bin" / "tsc"


def _run(
    args: Sequence[str | Path], cwd: Path = ROOT, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _go_env() -> dict[str, str]:
    # The flags of scripts/install-engine's builds: its Go build cache serves the sdk/v3 packages.
    return {
        **os.environ,
        "GOFLAGS": "-mod=readonly -trimpath -tags=osusergo,grpcnotrace",
        "GOWORK": "off",
        "CGO_ENABLED": "0",
    }


@pytest.fixture(scope="module", autouse=True)
def _tools() -> None:
    missing = [tool for tool in ("go", "npm") if shutil.which(tool) is None]
    if missing:
        message = f"{' and '.join(missing)} not on PATH: the SDK checks need Go and node"
        if _engine.in_ci():
            pytest.fail(f"{message} (CI=true: these checks may not be skipped)", pytrace=False)
        pytest.skip(message)
    proc = _run([SCRIPT, "setup"], timeout=1800)
    assert proc.returncode == 0, f"scripts/sdks setup failed:\n{proc.stdout}{proc.stderr}"


def _tree(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def test_the_committed_sdks_are_what_the_schema_generates(tmp_path: Path) -> None:
    proc = _run([SCRIPT, "generate", tmp_path])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    drift: list[str] = []
    for language in LANGUAGES:
        fresh, committed = tmp_path / language, SDK / language
        made, have = _tree(fresh), _tree(committed)
        drift += [f"sdk/{language}/{name}: missing" for name in sorted(made - have)]
        drift += [f"sdk/{language}/{name}: no longer generated" for name in sorted(have - made)]
        drift += [
            f"sdk/{language}/{name}: differs"
            for name in sorted(made & have)
            if not filecmp.cmp(fresh / name, committed / name, shallow=False)
        ]
    assert not drift, "the committed SDKs are not the schema's: run scripts/sdks generate\n" + "\n".join(
        drift
    )
    # Each SDK asks the engine for the plugin `together` at the package's version.
    assert '"name": "together"' in (SDK / "go" / "together" / "pulumi-plugin.json").read_text()


def test_the_typescript_sample_type_checks_and_a_wrong_field_does_not(tmp_path: Path) -> None:
    # One tsc run over the sample and a broken copy of it: the sample has no error, the copy exactly its two.
    sample = SAMPLES / "typescript" / "index.ts"
    broken = tmp_path / "broken.ts"
    broken.write_text(
        sample.read_text().replace("numGpus: 8,", "numGpu: 8,").replace("sizeTib: 2,", 'sizeTib: "2",')
    )
    config = (SAMPLES / "typescript" / "tsconfig.json").read_text().replace('"../../../', f'"{ROOT}/')
    config = config.replace('"files": ["index.ts"]', f'"files": ["{sample}", "{broken}"]')
    (tmp_path / "tsconfig.json").write_text(config)
    proc = _run([TSC, "-p", tmp_path / "tsconfig.json"])
    errors = [line for line in proc.stdout.splitlines() if "error TS" in line]
    assert errors and all("broken.ts(" in line for line in errors), proc.stdout
    assert len(errors) == 2, proc.stdout
    assert any("'numGpu' does not exist in type 'ClusterArgs'" in line for line in errors), proc.stdout
    assert any("Type 'string' is not assignable to type 'Input<number>'" in line for line in errors), (
        proc.stdout
    )


def test_the_go_sample_builds(tmp_path: Path) -> None:
    proc = _run(["go", "build", "-o", tmp_path / "sample", "."], cwd=SAMPLES / "go", env=_go_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_go_program_with_a_wrong_field_does_not_build(tmp_path: Path) -> None:
    module = tmp_path / "sample"
    shutil.copytree(SAMPLES / "go", module)
    gomod = module / "go.mod"
    gomod.write_text(gomod.read_text().replace("=> ../../../sdk/go", f"=> {SDK / 'go'}"))
    main = module / "main.go"
    main.write_text(
        main.read_text()
        .replace("NumGpus:            pulumi.Int(8)", "NumGpu: pulumi.Int(8)")
        .replace("SizeTib:    pulumi.Int(2)", 'SizeTib: pulumi.String("2")')
    )
    proc = _run(["go", "build", "-o", tmp_path / "out", "."], cwd=module, env=_go_env())
    assert proc.returncode != 0
    assert "unknown field NumGpu in struct literal of type together.ClusterArgs" in proc.stderr, proc.stderr
    assert 'cannot use pulumi.String("2")' in proc.stderr, proc.stderr


def test_the_python_sdk_installs_and_the_sample_type_checks(tmp_path: Path) -> None:
    # Installed as a user would (pip builds a wheel; setuptools from pip's cache or PyPI), from a copy: a build
    # leaves build/ and egg-info beside the sources.
    source, target = tmp_path / "sdk-python", tmp_path / "site"
    shutil.copytree(SDK / "python", source)
    proc = _run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", target, source])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    env = {**os.environ, "PYTHONPATH": str(target)}
    probe = (
        "import pulumi_together as t; "
        "print(t.Cluster.__name__, t.Volume.__name__, t._utilities.get_version(), t.GpuType('H100_SXM').value)"
    )
    proc = _run([sys.executable, "-c", probe], env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["Cluster", "Volume", _package_version(), "H100_SXM"]

    broken = tmp_path / "broken_sample.py"
    broken.write_text(
        (SAMPLES / "python" / "__main__.py")
        .read_text()
        .replace("num_gpus=8,", "num_gpu=8,")
        .replace("size_tib=2,", 'size_tib="2",')
    )
    mypy: list[str | Path] = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        SAMPLES / "python" / "mypy.ini",
        "--cache-dir",
        tmp_path / "mypy-cache",
    ]
    env = {**os.environ, "MYPYPATH": str(SDK / "python")}
    proc = _run([*mypy, SAMPLES / "python" / "__main__.py"], env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = _run([*mypy, broken], env=env, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert 'Unexpected keyword argument "num_gpu" for overloaded function "Cluster"' in proc.stdout, (
        proc.stdout
    )
    assert 'No overload variant of "Volume" matches argument types' in proc.stdout, (
        proc.stdout
    )  # size_tib="2"


def _package_version() -> str:
    for line in (ROOT / "pyproject.toml").read_text().splitlines():
        if line.startswith("version = "):
            return line.split('"')[1]
    raise AssertionError("no version in pyproject.toml")
