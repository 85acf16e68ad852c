"""The exit codes of every ``together-clusters`` command: one table, each code one meaning whichever command
returns it. Pure.

``together-clusters --help`` prints the table (:func:`help_table`) and the command-line reference of the
documentation lists it (``docs/hooks.py``). A code a command needs that means something new gets a row of
its own, the next number: a number is never given a second meaning.
"""

from __future__ import annotations

import textwrap
from enum import IntEnum, unique


@unique
class ExitCode(IntEnum):
    """An exit code, the commands that can return it and what it means (one line)."""

    # name = code, the commands that return it, what it means
    OK = 0, ("drift", "status", "drill", "remediations", "plugin"), (
        "nothing to act on: every stack in sync (drift), the status shown (status), every workload survived "
        "or the dry run's plan holds (drill), done or the dry run's plan shown (remediations), installed (plugin)"
    )
    ERROR = 1, ("drift", "status", "drill", "remediations", "plugin"), (
        "bad arguments, or the command could not do its work (a stack could not be checked or read, "
        "the engine or the API failed, the drill could not run, its pre-check refused it or its remediation did not "
        "succeed, the gate refused)"
    )
    DRIFT = 2, ("drift",), "drift found: a live resource differs from the code, changed or deleted outside it"
    PENDING = 3, ("drift",), "changes pending: the code has changes not deployed yet (only with --fail-on-pending)"
    STALLED = 4, ("drift", "status"), (
        "a workload is stalled for capacity: pods the scheduler cannot place, or a Kueue Workload not "
        "admitted (only with --fail-on-stalled)"
    )
    NOT_SURVIVED = 5, ("drill",), (
        "a workload the drill preempted or remediated did not survive: it failed, or a lost pod got no running "
        "replacement in time"
    )
    NOT_DRAINED = 6, ("remediations",), (
        "the node's work did not checkpoint and move within --timeout: the remediation was not approved (the "
        "node stays cordoned, the remediation pending; approve again to go on)"
    )

    commands: tuple[str, ...]
    meaning: str

    def __new__(cls, code: int, commands: tuple[str, ...], meaning: str) -> ExitCode:
        member = int.__new__(cls, code)
        member._value_ = code
        member.commands = commands
        member.meaning = meaning
        return member

    @property
    def label(self) -> str:
        """The member's name as the table shows it: ``not survived``."""
        return self.name.lower().replace("_", " ")


DRIFT_SEVERITY = (ExitCode.ERROR, ExitCode.DRIFT, ExitCode.PENDING, ExitCode.STALLED, ExitCode.OK)
"""``drift`` over several stacks returns the worst of their codes, in this order (an error says nothing
about the stack, drift is a finding, pending a choice, a stalled workload a wait for capacity the code
cannot help)."""


def help_table(width: int = 100) -> str:
    """The table as ``--help`` prints it: code, label, what it means and which commands return it."""
    label_width = max(len(code.label) for code in ExitCode)
    code_width = max(len(str(int(code))) for code in ExitCode)
    lines = ["exit codes (one meaning each, whichever command returns it; [the commands that return it]):"]
    for code in ExitCode:
        first = f"  {int(code):>{code_width}}  {code.label:<{label_width}}  "
        text = f"{code.meaning} [{', '.join(code.commands)}]"
        lines += textwrap.wrap(
            text, width, initial_indent=first, subsequent_indent=" " * len(first), break_on_hyphens=False
        )
    severity = ", ".join(str(int(code)) for code in DRIFT_SEVERITY)
    lines.append(f"drift over several stacks returns the worst of their codes, in the order {severity}.")
    return "\n".join(lines)


def markdown_table() -> str:
    """The table for the documentation: one row per code."""
    rows = ["| code | name | returned by | meaning |", "| --- | --- | --- | --- |"]
    for code in ExitCode:
        commands = ", ".join(f"`{command}`" for command in code.commands)
        rows.append(f"| `{int(code)}` {{ #exit-{int(code)} }} | {code.label} | {commands} | {code.meaning} |")
    severity = ", ".join(f"`{int(code)}`" for code in DRIFT_SEVERITY)
    return "\n".join(rows) + f"\n\n`drift` over several stacks returns the worst of their codes, in the order {severity}.\n"
