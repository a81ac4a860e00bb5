"""What every vendor purge shares: its outcome, the structural checks, the files to scan,
and the interface each vendor implements."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass
class PurgeOutcome:
    """What the vendor purge did. ``status`` is ``"purged"`` or ``"not purged: <reason>"``."""

    status: str
    vacuumed: bool = False
    notes: list[str] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)
    details: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the purge completed."""
        return self.status == "purged"


@dataclass
class Structure:
    """Vendor-level checks after a purge (SQLite: WAL size and free pages).

    ``scan_must_read`` names files (path → size) whose content the structural
    check leaves to the byte scan: the check passes only if the scan read each
    of them at least that far (:meth:`verdict`).
    """

    ok: bool
    text: str
    details: dict = field(default_factory=dict)
    scan_must_read: dict[str, int] = field(default_factory=dict)

    def verdict(self, read: Mapping[str, int]) -> tuple[bool, str]:
        """Pass/fail and text, given the bytes the byte scan read per path."""
        if not self.scan_must_read:
            return self.ok, self.text
        if any(read.get(path, 0) < size for path, size in self.scan_must_read.items()):
            return False, self.text + " (not empty, and no byte scan read it)"
        return self.ok, self.text + " (written since the purge; read by the byte scan)"


@dataclass
class ScanFiles:
    """The files a byte scan reads, or why there are none.

    ``transient`` marks a reason that may pass (the files changed under the scan:
    another session is rewriting them): the erasure is then not verified yet and is
    checked again later, instead of being taken as verified without a scan, as it is
    where no scan can ever run here (a database server on another machine).
    """

    paths: list[str]
    note: str = ""
    transient: bool = False

    @property
    def possible(self) -> bool:
        """True when there is something to scan."""
        return bool(self.paths)


def not_purged(reason: str, **kw) -> PurgeOutcome:
    return PurgeOutcome(status=f"not purged: {reason}", **kw)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class VendorPurge:
    name = ""

    @property
    def method(self) -> str:
        """The receipt's ``purge_method`` (each vendor names its own)."""
        return ""

    def prepare(self, connection) -> None:
        """Per-connection settings before the DELETEs (inside or outside a transaction)."""

    def delete_token(self, connection) -> dict:
        """Facts recorded inside the DELETE transaction that the purge needs later."""
        return {}

    @contextlib.contextmanager
    def by_index(self, connection):
        """Around the erasure's selection and deletes (inside its transaction): rows are
        found through their indexes."""
        yield

    def truncate(self, connection, tables: Sequence[str]) -> None:
        """Remove every row of ``tables`` (inside the erasure's transaction)."""
        qn = connection.ops.quote_name
        with connection.cursor() as cursor:
            for table in tables:
                cursor.execute(f"DELETE FROM {qn(table)}")

    def purge(
        self, connection, tables: Sequence[str], *, token: dict, timeout: float, method: str = ""
    ):
        """Make the deleted rows' bytes unrecoverable; returns a :class:`PurgeOutcome`.

        ``method`` overrides ``MEMORYAPP_ERASURE_PURGE_METHOD`` for this purge (a
        stronger purge after a failed verification: :mod:`memoryapp.db.ladder`).
        """
        raise NotImplementedError

    def structure(self, connection) -> Structure:
        """Structural checks after a successful purge."""
        return Structure(True, "")

    def settle(self, connection) -> None:
        """Best effort, after the receipt is written: leave no residue of that write either."""

    def storage_tables(
        self, connection, tables: Sequence[str], remainders: Sequence[int] | None
    ) -> tuple[list[str], dict[str, str]]:
        """The relations that hold ``tables``' rows for an erasure whose rows were in
        the hash partitions ``remainders`` (None: unknown, all of them), and a note per
        partitioned table. Unpartitioned vendors purge the tables as they are."""
        return list(tables), {}

    def scan_files(self, connection, tables: Sequence[str]) -> ScanFiles:
        """The files holding ``tables`` that this process can read."""
        return ScanFiles([], "no files to scan")

    def read_through_sql(
        self, connection, tables: Sequence[str], pieces: Sequence[bytes], *, heartbeat=None
    ):
        """The byte scan through the server's own SQL functions, or None where the vendor
        has none (:mod:`.sql_scan`: PostgreSQL); ``heartbeat`` as :func:`.sql_scan.scan`'s."""
        return None

    def caveats(self, connection) -> list[str]:
        """What this vendor's erasure cannot reach (for receipts and docs)."""
        return []

    def backup(self, connection, path: str) -> str:
        """Write a consistent copy to ``path`` (or explain how); returns a message."""
        raise NotImplementedError


def file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
