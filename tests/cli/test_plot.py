"""The status chart's time axis reads at every span: no tick label repeats, from minutes to weeks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from together_clusters.cli.status.plot import figure
from together_clusters.cli.status.timeline import Timeline

START = datetime(2026, 12, 1, 9, 0, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    "span",
    [
        timedelta(minutes=1),
        timedelta(minutes=3),
        timedelta(minutes=10),
        timedelta(hours=6),
        timedelta(days=3),
        timedelta(weeks=3),
        timedelta(days=60),
    ],
    ids=["1min", "3min", "10min", "6h", "3d", "3w", "60d"],
)
def test_every_tick_label_of_the_time_axis_is_distinct(span: timedelta) -> None:
    import matplotlib.pyplot as plt

    end = START + span
    middle = START + span / 2
    line = Timeline(
        points=[(START, 8), (middle, 0), (middle + span / 10, 8), (end, 8)], preemptions=[middle], desired=8
    )
    fig = figure("dev", [("cluster-a", line), ("cluster-b", line)])
    try:
        fig.canvas.draw()
        for ax in fig.axes:
            labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
            assert len(labels) >= 3, labels
            assert len(set(labels)) == len(labels), f"{span}: {labels}"
    finally:
        plt.close(fig)


def test_write_png_writes_the_figure(tmp_path) -> None:
    from together_clusters.cli.status.plot import write_png

    line = Timeline(points=[(START, 8), (START + timedelta(hours=1), 8)], preemptions=[], desired=8)
    out = write_png(tmp_path / "t.png", "dev", [("c", line)])
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
