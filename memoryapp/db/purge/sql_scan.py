"""The byte scan through SQL: a PostgreSQL server hands its own relation files to the scan.

With membership in ``pg_read_server_files`` and ``EXECUTE`` on
``pg_read_binary_file(text, bigint, bigint)`` (docs/operations.md, "Verifying every
copy"), a role that is not a superuser reads the files of the relations it names through
``pg_read_binary_file`` — on a server on another machine, and on a hot standby through its
own connection — with no process beside the database. The files are read in bounded
chunks (``CHUNK`` bytes a call), each searched with the tail of the one before it (the
longest fragment less one byte), so a fragment split across two chunks is still found.
The fragments never travel: only file names and offsets are sent to the server, and the
bytes are searched here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from django.db import DatabaseError

from memoryapp.db.finder import FileFinder, Finder

CHUNK = 1024 * 1024
READ_FUNCTION = "pg_read_binary_file(text,bigint,bigint)"

# The relation, its indexes, its TOAST table and the TOAST table's index: what the local
# scan reads too (PostgresPurge.scan_files).
RELATION_FILES = (
    "WITH t AS (SELECT to_regclass(%s) AS oid), rels AS ("
    " SELECT oid FROM t"
    " UNION SELECT indexrelid FROM pg_index, t WHERE indrelid = t.oid"
    " UNION SELECT c.reltoastrelid FROM pg_class c, t"
    "  WHERE c.oid = t.oid AND c.reltoastrelid <> 0"
    " UNION SELECT i.indexrelid FROM pg_index i, pg_class c, t"
    "  WHERE c.oid = t.oid AND i.indrelid = c.reltoastrelid)"
    " SELECT pg_relation_filepath(oid), pg_relation_size(oid) FROM rels"
    " WHERE oid IS NOT NULL"
)


@dataclass
class SqlScan:
    """What a scan through SQL read and found.

    ``note`` says why it could not finish (``transient``: the files changed under it, a
    rewrite by another session; checked again later).
    """

    found: set[int] = field(default_factory=set)
    bytes: int = 0
    files: int = 0
    note: str = ""
    transient: bool = False

    @property
    def complete(self) -> bool:
        """True when every file was read whole."""
        return not self.note


def relation_files(cursor, table: str) -> list[tuple[str, int]]:
    """``(path relative to the data directory, size)`` of ``table``'s relations."""
    cursor.execute(RELATION_FILES, [table])
    return [(path, int(size)) for path, size in cursor.fetchall() if path]


def unreadable(cursor) -> str:
    """Why this role cannot read the server's files through SQL ("" when it can)."""
    cursor.execute(
        "SELECT r.rolsuper, pg_has_role(current_user, 'pg_read_server_files', 'USAGE'),"
        " has_function_privilege(current_user, %s, 'EXECUTE')"
        " FROM pg_roles r WHERE r.rolname = current_user",
        [READ_FUNCTION],
    )
    row = cursor.fetchone()
    if row is None or row[0]:
        return ""
    missing = []
    if not row[1]:
        missing.append("membership in pg_read_server_files")
    if not row[2]:
        missing.append(f"EXECUTE on {READ_FUNCTION.replace(',', ', ')}")
    if not missing:
        return ""
    return "the database role lacks " + " and ".join(missing)


def identity(cursor) -> tuple[str, str]:
    """``(system_identifier, role)`` of the server: role ``"primary"`` or ``"replica"``.

    A physical standby shares its primary's ``system_identifier`` (it is a copy of the
    same cluster), so the role tells them apart.
    """
    cursor.execute("SELECT system_identifier::text, pg_is_in_recovery() FROM pg_control_system()")
    ident, recovering = cursor.fetchone()
    return str(ident), "replica" if recovering else "primary"


def current_lsn(cursor) -> str:
    """The primary's WAL position now: a replica that replayed past it has the erasure."""
    cursor.execute("SELECT pg_current_wal_lsn()::text")
    return str(cursor.fetchone()[0])


def replayed(cursor, lsn: str) -> bool:
    """True when this server holds every change up to ``lsn`` (a primary always does)."""
    cursor.execute(
        "SELECT CASE WHEN pg_is_in_recovery()"
        " THEN coalesce(pg_last_wal_replay_lsn() >= %s::pg_lsn, false) ELSE true END",
        [lsn],
    )
    return bool(cursor.fetchone()[0])


def _finder(pieces: Sequence[bytes]) -> Finder:
    short = min(len(p) for p in pieces) < FileFinder.MIN_BYTES
    return Finder(pieces) if short else FileFinder(pieces)


def scan(
    cursor,
    tables: Sequence[str],
    pieces: Sequence[bytes],
    *,
    chunk: int = CHUNK,
    heartbeat: Callable[[], None] | None = None,
) -> SqlScan:
    """Read ``tables``' files (and ``pg_statistic``'s) through SQL; which ``pieces`` occur.

    Each relation's 1 GB segments (``path``, ``path.1``, …) are read up to the size the
    server reports for it; a segment missing or shorter than that means another session
    rewrote the relation meanwhile (``transient``). ``heartbeat``, when given, is called
    before each chunk read (it may raise to stop the scan).
    """
    result = SqlScan()
    if not pieces:
        return result
    finder = _finder(pieces)
    overlap = max(len(p) for p in pieces) - 1
    cursor.execute("SELECT pg_size_bytes(current_setting('segment_size'))")
    segment = int(cursor.fetchone()[0])
    for table in [*tables, "pg_statistic"]:
        for path, size in relation_files(cursor, table):
            for number in range(max(1, -(-size // segment))):
                name = path if number == 0 else f"{path}.{number}"
                want = min(segment, size - number * segment)
                try:
                    got = _read_file(
                        cursor, name, want, chunk, finder, overlap, result.found, heartbeat
                    )
                except DatabaseError as exc:
                    result.note = f"{name} could not be read ({str(exc).strip().splitlines()[0]})"
                    result.transient = "could not open" in str(exc) or "No such file" in str(exc)
                    return result
                result.bytes += got
                result.files += 1
                if got < want:
                    result.note = "relation files do not match the server's sizes"
                    result.transient = True
                    return result
    return result


def _read_file(
    cursor, name: str, want: int, chunk: int, finder, overlap: int, found, heartbeat=None
) -> int:
    """Search ``want`` bytes of one file, ``chunk`` at a time; the bytes read."""
    offset = 0
    tail = b""
    while offset < want:
        if heartbeat is not None:
            heartbeat()
        cursor.execute("SELECT pg_read_binary_file(%s, %s, %s)", [name, offset, chunk])
        data = bytes(cursor.fetchone()[0] or b"")
        if not data:
            break
        offset += len(data)
        window = tail + data
        finder.search(window, found)
        tail = window[-overlap:] if overlap > 0 else b""
        if len(data) < chunk:
            break
    return offset


def files_under(cursor, data_directory: str, tables: Sequence[str]) -> list[str]:
    """The files of ``tables`` (and ``pg_statistic``) under ``data_directory``, each
    relation's segments included: what a verifier beside the server reads itself."""
    import os

    cursor.execute("SELECT pg_size_bytes(current_setting('segment_size'))")
    segment = int(cursor.fetchone()[0])
    paths: list[str] = []
    for table in [*tables, "pg_statistic"]:
        for path, size in relation_files(cursor, table):
            full = os.path.join(data_directory, path)
            paths.append(full)
            paths.extend(f"{full}.{n}" for n in range(1, -(-size // segment)))
    return paths
