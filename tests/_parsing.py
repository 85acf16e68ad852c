"""``ast.parse`` for the tests that read the product's source.

CPython 3.11 (this machine has 3.11.7) keeps the AST converter's recursion depth in state the interpreter's
threads share, and in a process with other threads running Python code (a server thread a test left serving, a
finalizer) a parse of valid source can fail with ``SystemError: AST constructor recursion depth mismatch``
(CPython gh-106905, pytest-dev/pytest#10763; seen here once, in a run on three xdist workers). That says nothing
of the source: parse it again.
"""

from __future__ import annotations

import ast

_INTERPRETER_BUG = "AST constructor recursion depth mismatch"
_ATTEMPTS = 3


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source, filename)``, again on CPython's spurious recursion-depth error."""
    for attempt in range(1, _ATTEMPTS + 1):
        try:
            return ast.parse(source, filename=filename)
        except SystemError as error:
            if _INTERPRETER_BUG not in str(error) or attempt == _ATTEMPTS:
                raise
    raise AssertionError("unreachable")
