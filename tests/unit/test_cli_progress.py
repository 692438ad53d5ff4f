"""The CLI's progress bar over audio seconds."""

from __future__ import annotations

from voxserve.cli.files import _Bar


def test_the_bar_ends_at_the_total_however_its_steps_round() -> None:
    """Chunk progress arrives in steps like 0.04 s; summing each step rounded to 0.1 s ran the bar past its
    total (622.0 of 621.9) and tqdm warned."""
    total = 0.0
    steps = [0.04, 0.16, 0.27, 0.05, 0.33] * 40
    bar = _Bar(sum(steps), enabled=True)
    hook = bar.hook(0)
    shown = []
    for step in steps:
        total += step
        hook(total, sum(steps))
        shown.append(bar._bar.n)
    assert all(a <= b for a, b in zip(shown, shown[1:]))
    assert shown[-1] == bar._bar.total
    bar.close()
