"""The progress line of long CLI verbs: a bar on a terminal, plain lines otherwise."""

from __future__ import annotations

import io

from memoryapp.cli.progress import Progress


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_a_terminal_gets_one_redrawn_line_with_rate_and_eta_then_a_newline():
    out, clock = io.StringIO(), Clock()
    bar = Progress(out, "importing", tty=True, clock=clock)
    for done in (100, 200, 500):
        clock.t += 1.0
        bar.update(done, 1000)
    text = out.getvalue()
    assert text.count("\r") == 3 and "\n" not in text
    last = text.rsplit("\r", 1)[1]
    assert "[############............]" in last and "500/1,000 rows" in last
    assert "167 rows/s" in last and "ETA 3s" in last
    bar.close()
    assert out.getvalue().endswith("\n")


def test_redraws_are_rate_limited_but_the_end_is_always_drawn():
    out, clock = io.StringIO(), Clock()
    bar = Progress(out, "exporting", tty=False, clock=clock)
    for done in range(1, 100):
        clock.t += 0.01
        bar.update(done, 100)
    assert out.getvalue() == ""  # under 5 s: no plain line yet
    bar.update(100, 100)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and "100/100 rows" in lines[0] and "ETA" not in lines[0]


def test_phases_without_counts_and_quiet():
    out, clock = io.StringIO(), Clock()
    bar = Progress(out, "erasing", tty=False, clock=clock)
    bar.phase("deleting")
    clock.t = 61
    bar.phase("purging")
    assert out.getvalue().splitlines() == ["erasing (deleting) 0s", "erasing (purging) 1m01s"]
    silent = io.StringIO()
    quiet = Progress(silent, "erasing", quiet=True, tty=True)
    quiet.phase("deleting")
    quiet.update(5, 10)
    quiet.close()
    assert silent.getvalue() == ""
