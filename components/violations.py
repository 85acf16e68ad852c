"""One broken rule, as the argument checks and the placement guard report it (pure, standard library only)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Violation:
    """One broken rule: which object and field, the value found, what is wrong and how to fix it.

    The guard's violations name a rendered object (``subject``, e.g. ``Job/ft``) and a field path in it.
    An argument's violation has no subject: its ``field`` is the argument, and its ``problem`` already
    names the argument and its value, in the words users know.
    """

    rule: str
    subject: str
    field: str
    value: Any
    problem: str
    fix: str

    def __str__(self) -> str:
        if not self.subject:
            return f"{self.problem}; {self.fix}"
        return f"{self.subject} {self.field}={self.value!r}: {self.problem}. Fix: {self.fix}"


def argument_violation(rule: str, field: str, value: Any, problem: str, fix: str) -> Violation:
    """A violation of a component's argument ``field`` (its ``problem`` names the field and the value)."""
    return Violation(rule, "", field, value, problem, fix)
