"""The package's expected errors, raised in a Pulumi program, reported as Pulumi reports its own: the message
alone, without a traceback.

The Python language host prints a ``pulumi.RunError`` that ends a program as its message, and any other
exception as "Program failed with an unhandled exception" and the whole traceback. A refused argument or
layout (``ArgsError``, ``PlacementRefused``, every ``TogetherError``) is the user's input, not a bug: its one
line names the field, the value and the fix, and a traceback would only bury it. ``together_clusters.errors``
imports the standard library only (the command line and the dynamic provider's host load it without Pulumi's
SDK), so ``RunError`` becomes ``TogetherError``'s base here, once Pulumi is imported anyway: by
``.resource``, which every program using the package loads. An unexpected error (a
bug) keeps its traceback.
"""

from __future__ import annotations

import pulumi

from together_clusters.errors import TogetherError


def install() -> None:
    """Make every ``TogetherError`` a ``pulumi.RunError`` (idempotent)."""
    if not issubclass(TogetherError, pulumi.RunError):
        # In place of errors._ExpectedError, a plain Exception subclass of the same layout as RunError.
        TogetherError.__bases__ = (pulumi.RunError,)
