"""``together_clusters.errors`` is the one home of the distribution's errors: every public error class is a
``TogetherError`` defined there, and no other module of the product (provider, components, cli) defines an
exception class of its own unless it is private. So ``except TogetherError`` catches whatever the package
raises on purpose, and the tree documented in ``errors.py`` is the whole tree."""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import pkgutil
from pathlib import Path

from tests._parsing import parse
from together_clusters import errors
from together_clusters.errors import TogetherError

ROOT = Path(__file__).resolve().parents[2]
PUBLIC_MODULES = (
    "together_clusters.provider",
    "together_clusters.components",
    "together_clusters.components.checkpoint",
    "together_clusters.cli",
)
# The product's trees: an exception class defined there is private (a leading underscore: caught where it
# is raised, it never reaches a user) or it belongs in errors.py.
PRODUCT_TREES = ("provider", "components", "cli")

ROOT_CLASSES = {
    name: obj
    for name, obj in vars(errors).items()
    if inspect.isclass(obj)
    and issubclass(obj, BaseException)
    and obj.__module__ == errors.__name__
    and not name.startswith("_")  # TogetherError's private base, swapped for pulumi.RunError in a program
}


RUNTIME_ERRORS = "together_clusters.components.checkpoint.errors"
"""The checkpoint runtime's own errors: a distribution of its own that installs without this tree, so its two
errors are drawn in its module and re-exported by ``together_clusters.errors`` beside the tree."""


def _runtime_error(obj: type[BaseException]) -> bool:
    """One of the runtime's errors, re-exported by ``together_clusters.errors`` under its own name."""
    return obj.__module__ == RUNTIME_ERRORS and getattr(errors, obj.__name__, None) is obj


def _public_modules() -> list[str]:
    """The public packages, and each module under them that declares what it exports (``__all__``)."""
    found = list(PUBLIC_MODULES)
    for package_name in PUBLIC_MODULES:
        package = importlib.import_module(package_name)
        for info in pkgutil.walk_packages(package.__path__, f"{package_name}."):
            if any(part.startswith("_") for part in info.name.split(".")) or info.name in found:
                continue
            if hasattr(importlib.import_module(info.name), "__all__"):
                found.append(info.name)
    return found


def _exported_errors(module_name: str) -> dict[str, type[BaseException]]:
    """The exception classes a module exports: its ``__all__``, else its public names."""
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
    objects = {name: getattr(module, name) for name in names}
    return {n: o for n, o in objects.items() if inspect.isclass(o) and issubclass(o, BaseException)}


def test_every_error_of_the_root_is_a_together_error():
    assert ROOT_CLASSES, "together_clusters.errors defines the tree"
    assert [n for n, cls in ROOT_CLASSES.items() if not issubclass(cls, TogetherError)] == []


def test_the_only_private_error_class_is_together_errors_base():
    private = [
        n
        for n, o in vars(errors).items()
        if inspect.isclass(o) and n.startswith("_") and issubclass(o, BaseException)
    ]
    assert private == ["_ExpectedError"]
    assert [c for c in errors._ExpectedError.__subclasses__() if c is not TogetherError] == []


def test_every_error_class_in_the_trees_docstring_exists_and_every_one_is_drawn():
    drawn = {
        line.split("──", 1)[1].split()[0] for line in (errors.__doc__ or "").splitlines() if "──" in line
    }
    assert drawn | {"TogetherError"} == set(ROOT_CLASSES)


def test_every_exported_error_is_a_together_error_of_the_root():
    exported = {f"{m}.{n}": o for m in _public_modules() for n, o in _exported_errors(m).items()}
    assert len(exported) > len(ROOT_CLASSES) / 2, "the walk finds the subpackages' errors"
    not_roots = {
        where: f"{o.__module__}.{o.__qualname__}"
        for where, o in exported.items()
        if ROOT_CLASSES.get(o.__name__) is not o and not _runtime_error(o)
    }
    assert not_roots == {}, "exported errors that are not together_clusters.errors' own"
    assert [
        w for w, o in exported.items() if not issubclass(o, TogetherError) and not _runtime_error(o)
    ] == []


def test_the_runtime_s_errors_are_re_exported_and_named_beside_the_tree():
    runtime = importlib.import_module(RUNTIME_ERRORS)
    defined = {n for n, o in vars(runtime).items() if inspect.isclass(o) and issubclass(o, BaseException)}
    defined = {n for n in defined if getattr(runtime, n).__module__ == RUNTIME_ERRORS}
    assert defined == {"CheckpointSuperseded", "CorruptCheckpoint", "S3ExtraMissing"}
    assert all(getattr(errors, n) is getattr(runtime, n) for n in defined)
    assert all(f"``{n}``" in (errors.__doc__ or "") for n in defined), "errors.py names them beside its tree"


def _exception_classes(tree: ast.Module) -> list[str]:
    """The names of the classes defined in ``tree`` (at any depth) whose bases are exceptions: a built-in
    exception, a class of the root, a name that says it is one (``...Error``, ``...Exception``), or another
    exception class of the same module."""
    known = {n for n, o in vars(builtins).items() if inspect.isclass(o) and issubclass(o, BaseException)}
    known |= set(ROOT_CLASSES)
    classes = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    found: list[str] = []
    changed = True
    while changed:  # a subclass of a local exception class is one too, wherever it is defined
        changed = False
        for node in classes:
            if node.name in found:
                continue
            bases = {ast.unparse(base).rsplit(".", 1)[-1] for base in node.bases}
            if bases & known or any(b.endswith(("Error", "Exception", "Warning")) for b in bases):
                found.append(node.name)
                known.add(node.name)
                changed = True
    return found


def test_no_public_exception_class_is_defined_outside_the_root():
    outside: dict[str, list[str]] = {}
    for tree in PRODUCT_TREES:
        for path in sorted((ROOT / tree).rglob("*.py")):
            where = str(path.relative_to(ROOT))
            defined = _exception_classes(parse(path.read_text(), filename=where))
            public = [name for name in defined if not name.startswith("_")]
            if public:
                outside[where] = public
    assert outside == {}, "define public errors in together_clusters/errors.py (and draw them in its tree)"


def test_the_scan_sees_exception_classes():
    """The scan itself: what it must find, and what it must not."""
    source = (
        "class Plain:\n    pass\n"
        "class _Stop(Exception):\n    pass\n"
        "class Later(_Stop):\n    pass\n"
        "class Api(httpx.HTTPError):\n    pass\n"
        "class Refused(PlacementRefused):\n    pass\n"
        "def f():\n    class Inner(ValueError):\n        pass\n"
    )
    assert sorted(_exception_classes(parse(source))) == ["Api", "Inner", "Later", "Refused", "_Stop"]
