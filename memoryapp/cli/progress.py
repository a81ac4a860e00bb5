"""Progress of long verbs on standard error: a bar with rate and ETA on a terminal,
plain periodic lines otherwise (logs, CI), nothing with ``--quiet``.

Progress is not output: it never goes to standard output (which may be the
export's JSON), and the line is always ended before anything else is printed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TextIO

BAR_WIDTH = 24
TTY_INTERVAL = 0.1  # seconds between redraws on a terminal
LINE_INTERVAL = 5.0  # seconds between plain lines when not a terminal


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class Progress:
    """``update(done, total)`` as work advances, ``phase(name)`` between steps, ``close()``.

    Args:
        stream: where to write (the command's standard error).
        label: what is being done ("importing", "erasing").
        unit: what ``done`` counts ("rows").
        quiet: write nothing.
        tty: whether ``stream`` is a terminal (default: ask it).
        clock: a ``time.monotonic`` stand-in (tests).
    """

    def __init__(
        self,
        stream: TextIO,
        label: str,
        *,
        unit: str = "rows",
        quiet: bool = False,
        tty: bool | None = None,
        clock=time.monotonic,
    ) -> None:
        self.stream, self.label, self.unit, self.quiet = stream, label, unit, quiet
        # Django's OutputWrapper ends every write with a newline unless told not to.
        wrapped = hasattr(stream, "style_func")
        write: Callable[..., object] = stream.write
        self._write = (lambda text: write(text, ending="", style_func=str)) if wrapped else write
        self.tty = stream.isatty() if tty is None else tty
        self.clock = clock
        self.started = self._last = clock()
        self.done = 0
        self.total: int | None = None
        self.step = ""
        self._open = False  # a terminal line is drawn and not yet ended
        self._lock = threading.Lock()
        self._stop: threading.Event | None = None

    def tick(self, every: float = 1.0) -> Progress:
        """Keep the elapsed time moving during steps that report nothing (a VACUUM)."""
        if self.quiet or self._stop is not None:
            return self
        self._stop = stop = threading.Event()

        def run() -> None:
            while not stop.wait(every):
                self._maybe_draw(final=False)

        threading.Thread(target=run, name="progress", daemon=True).start()
        return self

    # -------------------------------------------------------------- updates
    def update(self, done: int, total: int | None = None) -> None:
        """``done`` units so far (of ``total``, when known)."""
        self.done = done
        if total is not None:
            self.total = total
        self._maybe_draw(final=total is not None and done >= total)

    def phase(self, name: str) -> None:
        """A new step of work without a count (e.g. "purging"): always shown."""
        self.step = name
        self._maybe_draw(final=True)

    def close(self) -> None:
        """Stop ticking and end the line."""
        if self._stop is not None:
            self._stop.set()
        if self.quiet:
            return
        with self._lock:
            if self.tty and self._open:
                self._write("\n")
                self._open = False
            self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -------------------------------------------------------------- drawing
    def text(self) -> str:
        """The current line, without control characters."""
        elapsed = max(self.clock() - self.started, 1e-9)
        parts = [self.label + (f" ({self.step})" if self.step else "")]
        if self.total:
            filled = min(BAR_WIDTH, int(BAR_WIDTH * self.done / self.total))
            parts.append(f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}]")
            parts.append(f"{self.done:,}/{self.total:,} {self.unit}")
        elif self.done:
            parts.append(f"{self.done:,} {self.unit}")
        if self.done:
            rate = self.done / elapsed
            parts.append(f"{rate:,.0f} {self.unit}/s")
            if self.total and self.done < self.total and rate > 0:
                parts.append(f"ETA {_duration((self.total - self.done) / rate)}")
        parts.append(_duration(elapsed))
        return " ".join(parts)

    def _maybe_draw(self, *, final: bool) -> None:
        if self.quiet:
            return
        with self._lock:
            now = self.clock()
            interval = TTY_INTERVAL if self.tty else LINE_INTERVAL
            if not final and now - self._last < interval:
                return
            self._last = now
            if self.tty:
                self._write("\r\x1b[K" + self.text())
                self._open = True
            else:
                self._write(self.text() + "\n")
            self.stream.flush()


def for_command(cmd, options, label: str, *, unit: str = "rows") -> Progress:
    """The progress line of a ``manage.py memory`` verb (``--quiet`` silences it)."""
    return Progress(cmd.stderr, label, unit=unit, quiet=bool(options.get("quiet")))
