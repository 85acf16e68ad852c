"""Draw the allocation timeline of each cluster to a PNG (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from together_clusters._extras import requires_extra

from .timeline import Timeline

# Tick label formats from the shortest, each with the finest unit it shows: the first that shows every tick
# exactly (nothing finer than its unit is set) and tells every tick apart is used. A fixed "%m-%d %H:%M"
# printed one label six times on a span of minutes; matplotlib's concise labels repeat too ("15" for the
# 15th of each month, "30" for second 30 of each minute), leaning on a context a reader has to rebuild.
_LADDER = (
    ("%H:%M", "minute"),
    ("%H:%M:%S", "second"),
    ("%b %d", "day"),
    ("%b %d %H:%M", "minute"),
    ("%b %Y", "month"),
    ("%Y-%m-%d", "day"),
    ("%Y-%m-%d %H:%M", "minute"),
    ("%Y-%m-%d %H:%M:%S", "second"),
)
_UNSET_BELOW = {
    "month": {"day": 1, "hour": 0, "minute": 0, "second": 0, "microsecond": 0},
    "day": {"hour": 0, "minute": 0, "second": 0, "microsecond": 0},
    "minute": {"second": 0, "microsecond": 0},
    "second": {"microsecond": 0},
}
"""Per unit, the fields a tick shown in it must have at their start (a label must not hide a part of it)."""


def distinct_labels(ticks: Sequence[datetime]) -> tuple[list[str], str]:
    """Labels for the ticks, all distinct, and the date they leave out (the axis' offset text, or empty)."""
    for fmt, unit in _LADDER:
        exact = all(getattr(t, f) == v for t in ticks for f, v in _UNSET_BELOW[unit].items())
        labels = [t.strftime(fmt) for t in ticks]
        if exact and len(set(labels)) == len(labels):
            dated = "%d" in fmt or "%Y" in fmt
            return labels, "" if dated or not ticks else ticks[0].strftime("%Y-%m-%d")
    return [t.isoformat() for t in ticks], ""


def figure(stack: str, timelines: Sequence[tuple[str, Timeline]]) -> Any:
    """One panel per cluster: allocated preemptible GPUs as a step line, the desired count dashed,
    preemptions as red triangles, node repairs as purple crosses and the arrivals of fleet workloads that
    moved from another region as green diamonds above it. Returns the matplotlib Figure
    (the caller closes it)."""
    with requires_extra("plot", "the status chart (--png)"):
        import matplotlib

        matplotlib.use("Agg")  # before pyplot: CI and servers have no display
        import matplotlib.dates as mdates
        import matplotlib.pyplot as plt
        from matplotlib import ticker

    class DistinctDates(ticker.Formatter):
        """:func:`distinct_labels` as a matplotlib formatter (it labels all ticks at once)."""

        offset = ""

        def format_ticks(self, values: Any) -> list[str]:
            labels, self.offset = distinct_labels([mdates.num2date(v, tz=UTC) for v in values])
            return labels

        def __call__(self, x: float, pos: int | None = None) -> str:
            return distinct_labels([mdates.num2date(x, tz=UTC)])[0][0]

        def get_offset(self) -> str:
            return self.offset

    panels = max(len(timelines), 1)
    fig, axes = plt.subplots(panels, 1, figsize=(10, 3.2 * panels), squeeze=False, sharex=False)
    for ax, (name, line) in zip(axes[:, 0], timelines, strict=False):
        times = [t for t, _ in line.points]
        values = [v for _, v in line.points]
        ax.step(
            times, values, where="post", color="tab:blue", linewidth=2, label="allocated preemptible GPUs"
        )
        ax.axhline(line.desired, color="tab:gray", linestyle="--", linewidth=1, label="desired (now)")
        top = max([*values, line.desired, 1])
        _mark(ax, line.preemptions, top * 1.05, _Marker("v", "tab:red", "preemption", "-", 0.25))
        _mark(ax, line.repairs, top * 1.12, _Marker("X", "tab:purple", "node repair", ":", 0.2))
        _mark(ax, line.arrivals, top * 1.19, _Marker("D", "tab:green", "workload moved here", "--", 0.2))
        ax.set_title(name)
        ax.set_ylabel("GPUs")
        ax.set_ylim(bottom=0, top=max([*values, line.desired, 1]) * 1.3)
        # Ticks at a step that suits the span (seconds to months), labels told apart (see _LADDER).
        ax.xaxis.set_major_locator(mdates.AutoDateLocator(tz=UTC, minticks=3, maxticks=9))
        ax.xaxis.set_major_formatter(DistinctDates())
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best", fontsize="small")
    if not timelines:
        axes[0, 0].text(0.5, 0.5, "no clusters", ha="center", va="center")
    fig.suptitle(f"Stack {stack}: preemptible GPU allocation (UTC)")
    fig.tight_layout()
    return fig


def write_png(path: str | Path, stack: str, timelines: Sequence[tuple[str, Timeline]]) -> Path:
    """:func:`figure` drawn to a PNG. Returns the path written."""
    fig = figure(stack, timelines)  # first: it names the plot extra when matplotlib is missing
    import matplotlib.pyplot as plt

    out = Path(path)
    fig.savefig(out, format="png", dpi=100)
    plt.close(fig)
    return out


@dataclass(frozen=True)
class _Marker:
    """How one kind of moment is drawn: a marker above the curve and a faint line down through it."""

    shape: str
    color: str
    label: str
    line_style: str
    alpha: float


def _mark(ax: Any, moments: Sequence[Any], height: float, marker: _Marker) -> None:
    if not moments:
        return
    ax.scatter(
        moments,
        [height] * len(moments),
        marker=marker.shape,
        color=marker.color,
        zorder=3,
        label=marker.label,
    )
    for moment in moments:
        ax.axvline(moment, color=marker.color, alpha=marker.alpha, linewidth=1, linestyle=marker.line_style)
