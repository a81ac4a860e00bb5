"""Who runs a receipt: the lease a process takes on it, and whether its holder still lives.

The worker, a request and a retry by hand each lease a receipt before running it,
so that no two processes purge the same receipt at once.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import socket
from collections.abc import Sequence

from django.db.models import Q

from memoryapp import conf
from memoryapp.fields import now
from memoryapp.models import (
    ErasureReceipt,
)


def process_started(pid: int) -> str | None:
    """When process ``pid`` started, as the kernel counts it (clock ticks since boot:
    field 22 of ``/proc/<pid>/stat``); None where that cannot be read (not Linux, gone).

    With the pid it tells a process apart from a later one reusing its pid — as a
    restarted container does, where the host name and the pid repeat.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except OSError:
        return None
    # Field 2 (the command) is in parentheses and may hold spaces or ")": count after it.
    fields = data[data.rfind(b")") + 1 :].split()
    if len(fields) < 20 or not fields[19].isdigit():
        return None
    return fields[19].decode()  # fields[0] is field 3, so field 22 is fields[19]


def worker_name() -> str:
    """This process as a claim on a receipt names it: ``host:pid@started`` (its start
    time, :func:`process_started`), or ``host:pid`` where the start time is unknown."""
    pid = os.getpid()
    started = process_started(pid)
    return f"{socket.gethostname()}:{pid}" + (f"@{started}" if started else "")


def holder_gone(claimed_by: str) -> bool:
    """True when the claim was made by a process of this host that no longer runs.

    ``claimed_by`` is a :func:`worker_name`: ``host:pid@started``, or
    ``host:pid`` as written before the start time was recorded. A process running
    under that pid but started at another time is not the holder: it reuses the pid
    (a restarted container repeats both the host name and the pid), so the holder is
    gone. Without a start time (the old form, or one that cannot be read here) a
    running pid counts as the holder, alive.
    """
    host, _, rest = claimed_by.rpartition(":")
    pid_text, _, started = rest.partition("@")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid != os.getpid():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # alive, another user's
            pass
    if not started:
        return False
    running = process_started(pid)
    return running is not None and running != started


class ReceiptInProgress(Exception):
    """A receipt retried by hand is leased to another live process (the worker, a
    request, another retry): it is not retried now. ``str()`` says by whom and when
    to try again; ``receipt_id``, ``holder`` and ``seconds`` say it to a program."""

    def __init__(self, receipt_id: str, holder: str, seconds: int) -> None:
        self.receipt_id, self.holder, self.seconds = receipt_id, holder, seconds
        super().__init__(
            f"erasure receipt {receipt_id} is in progress (held by {holder or 'another process'}), "
            f"try again in {seconds} s"
        )


def take_lease(r: ErasureReceipt, *, using: str, holder: str) -> ErasureReceipt:
    """Lease ``r`` to ``holder`` as the worker's claim does, and return it as now stored.

    One conditional update: it succeeds only when no live process holds ``r`` — never
    claimed, the lease (or a backoff's due time) over, no holder named, or the holder
    is a process of this host that is gone. Otherwise :class:`ReceiptInProgress`.
    """
    at = now()
    free = Q(claimed_by="") | Q(claimed_until__isnull=True) | Q(claimed_until__lte=at)
    if r.claimed_by and holder_gone(r.claimed_by):
        free |= Q(claimed_by=r.claimed_by)
    until = at + dt.timedelta(seconds=conf.erasure_worker_lease())
    rows = ErasureReceipt.objects.using(using)
    if rows.filter(free, pk=r.pk).update(claimed_by=holder, claimed_until=until):
        return rows.get(pk=r.pk)
    current = rows.filter(pk=r.pk).values_list("claimed_by", "claimed_until").first()
    holder_now, ends = current if current is not None else ("", None)
    seconds = math.ceil((ends - at).total_seconds()) if ends is not None else 0
    raise ReceiptInProgress(r.pk, holder_now or "", max(seconds, 1))


def drop_lease(receipts: Sequence[ErasureReceipt], *, using: str, holder: str) -> None:
    """Release what ``holder`` still holds of ``receipts`` (an outcome recorded already
    dropped it, or scheduled the next attempt: that is left as it is)."""
    ErasureReceipt.objects.using(using).filter(
        pk__in=[r.pk for r in receipts], claimed_by=holder
    ).update(claimed_by="", claimed_until=None)
