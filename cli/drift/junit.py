"""The drift check of a fleet of stacks as JUnit XML, one test case per stack. Pure.

CI systems show JUnit natively (GitHub Actions through a reporter action, GitLab's ``artifacts:reports:
junit``, Jenkins' ``junit`` step): a drifted stack is a failed test naming its fields, a stack that could
not be checked an errored one, pending changes a failure only with ``--fail-on-pending`` and a workload
stalled for capacity only with ``--fail-on-stalled``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from ..exit_codes import ExitCode
from .report import stack_text
from .results import StackResult

SUITE = "together-clusters drift"


def junit_xml(results: Sequence[StackResult], fail_on_pending: bool, fail_on_stalled: bool = False) -> str:
    failures = sum(
        1 for r in results if r.report is not None and _failed(r, fail_on_pending, fail_on_stalled)
    )
    errors = sum(1 for r in results if r.report is None)
    total = f"{sum(r.seconds for r in results):.3f}"
    counts = {"tests": str(len(results)), "failures": str(failures), "errors": str(errors), "time": total}
    root = ET.Element("testsuites", {"name": SUITE, **counts})
    suite = ET.SubElement(root, "testsuite", {"name": SUITE, **counts, "skipped": "0"})
    for r in results:
        case = ET.SubElement(
            suite, "testcase", {"classname": SUITE, "name": f"stack {r.stack}", "time": f"{r.seconds:.3f}"}
        )
        if r.report is None:
            ET.SubElement(case, "error", {"type": "error", "message": r.error or "failed"}).text = r.error
        elif _failed(r, fail_on_pending, fail_on_stalled):
            kind = {ExitCode.DRIFT: "drift", ExitCode.PENDING: "changes-pending", ExitCode.STALLED: "stalled"}[
                r.exit_code(fail_on_pending, fail_on_stalled)
            ]
            ET.SubElement(case, "failure", {"type": kind, "message": _message(r)}).text = stack_text(r)
        else:
            ET.SubElement(case, "system-out").text = stack_text(r)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _failed(result: StackResult, fail_on_pending: bool, fail_on_stalled: bool) -> bool:
    return result.exit_code(fail_on_pending, fail_on_stalled) != 0


def _message(result: StackResult) -> str:
    """The failure in one line: which resources and fields."""
    report = result.report
    assert report is not None
    what = [f"{d.resource}.{d.field}: code {d.code!r}, live {d.live!r}" for d in report.drift]
    what += [f"{m.resource} ({m.id}) missing" for m in report.missing]
    if not what:
        what = [f"{p.resource}: {p.field or p.op} pending" for p in report.pending]
    if not what:
        what = [f"{s.workload} stalled for capacity" for s in report.stalled]
    return f"stack {result.stack}: " + "; ".join(what)
