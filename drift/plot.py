"""Draw the allocation timeline of each cluster to a PNG (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from together_clusters._extras import requires_extra

from .timeline import Timeline


def write_png(path: str | Path, stack: str, timelines: Sequence[tuple[str, Timeline]]) -> Path:
    """One panel per cluster: allocated preemptible GPUs as a step line, the desired count dashed,
    preemptions as red markers. Returns the path written."""
    with requires_extra("plot", "the status chart (--png)"):
        import matplotlib

        matplotlib.use("Agg")  # before pyplot: CI and servers have no display
        import matplotlib.dates as mdates
        import matplotlib.pyplot as plt

    panels = max(len(timelines), 1)
    fig, axes = plt.subplots(panels, 1, figsize=(10, 3.2 * panels), squeeze=False, sharex=False)
    for ax, (name, line) in zip(axes[:, 0], timelines, strict=False):
        times = [t for t, _ in line.points]
        values = [v for _, v in line.points]
        ax.step(
            times, values, where="post", color="tab:blue", linewidth=2, label="allocated preemptible GPUs"
        )
        ax.axhline(line.desired, color="tab:gray", linestyle="--", linewidth=1, label="desired (now)")
        if line.preemptions:
            top = max([*values, line.desired, 1])
            ax.scatter(
                line.preemptions,
                [top * 1.05] * len(line.preemptions),
                marker="v",
                color="tab:red",
                zorder=3,
                label="preemption",
            )
            for moment in line.preemptions:
                ax.axvline(moment, color="tab:red", alpha=0.25, linewidth=1)
        ax.set_title(name)
        ax.set_ylabel("GPUs")
        ax.set_ylim(bottom=0, top=max([*values, line.desired, 1]) * 1.2)
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M", tz="UTC"))
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best", fontsize="small")
    if not timelines:
        axes[0, 0].text(0.5, 0.5, "no clusters", ha="center", va="center")
    fig.suptitle(f"Stack {stack}: preemptible GPU allocation (UTC)")
    fig.autofmt_xdate()
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, format="png", dpi=100)
    plt.close(fig)
    return out
