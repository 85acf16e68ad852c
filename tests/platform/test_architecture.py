"""The layering the design promises: product code never imports the emulator, and the platform's vocabulary
imports nothing beyond the standard library (the in-container checkpoint runtime relies on it)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from tests._parsing import parse

ROOT = Path(__file__).resolve().parents[2]

# The product side, as (folder, the package its modules live in).
PRODUCT = (
    (ROOT / "provider", "together_clusters.provider"),
    (ROOT / "components", "together_clusters.components"),
    (ROOT / "drift", "together_clusters.drift"),
    (ROOT / "templates", "together_clusters.templates"),
    (ROOT / "examples", "examples"),
    (ROOT / "together_clusters" / "platform", "together_clusters.platform"),
)
PRODUCT_FILES = ((ROOT / "together_clusters" / "errors.py", "together_clusters"),)
EMULATOR = "together_clusters.emulator"


def _package_of(path: Path, folder: Path, package: str) -> str:
    parts = path.relative_to(folder).parent.parts
    return ".".join([package, *parts])


def _imported(tree: ast.AST, package: str) -> list[tuple[int, str]]:
    """Every module an import statement names (relative ones resolved), at any depth (function-level too),
    and every literal ``importlib.import_module("...")`` / ``__import__("...")``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.append((node.lineno, node.args[0].value))
    return found


def _product_modules() -> list[tuple[Path, str]]:
    modules = [
        (path, _package_of(path, folder, package))
        for folder, package in PRODUCT
        for path in sorted(folder.rglob("*.py"))
        if "__pycache__" not in path.parts
    ]
    return modules + list(PRODUCT_FILES)


def test_no_product_module_imports_the_emulator() -> None:
    modules = _product_modules()
    assert len(modules) > 50, "the product's modules were not found"
    offenders: dict[str, str] = {}  # one line per import statement
    for path, package in modules:
        for line, name in _imported(parse(path.read_text(), str(path)), package):
            if name == EMULATOR or name.startswith(EMULATOR + "."):
                offenders.setdefault(f"{path.relative_to(ROOT)}:{line}", f"imports {name}")
    assert not offenders, "product code imports the emulator:\n" + "\n".join(
        f"{where}: {what}" for where, what in offenders.items()
    )


def test_the_import_check_sees_relative_and_function_level_imports() -> None:
    tree = parse("def f():\n    from ..emulator.kubernetes import nodes\n")
    assert (2, "together_clusters.emulator.kubernetes") in _imported(tree, "together_clusters.drift")


def test_the_platform_vocabulary_imports_only_the_standard_library() -> None:
    probe = (
        "import json, sys\n"
        "before = set(sys.modules)\n"
        "import together_clusters.platform\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    env_path = str(ROOT)
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"},
    ).stdout
    loaded = json.loads(out)
    ours = {"together_clusters", "together_clusters.platform"}
    foreign = [m for m in loaded if m not in ours and m.split(".")[0] not in sys.stdlib_module_names]
    assert "together_clusters.platform" in loaded
    assert not foreign, (
        f"importing together_clusters.platform loads more than the standard library: {foreign}"
    )
