"""Which PostgreSQL files a byte scan reads: only the connected server's, read here."""

from __future__ import annotations

import os
import struct

from django.db import DatabaseError

from memoryapp.db.purge import sql_scan
from memoryapp.db.purge.common import ScanFiles, file_size

LOCAL_HOSTS = ("", "localhost", "127.0.0.1", "::1")
"""The host names taken as this machine (and a socket path). Any other name — even one
that resolves here, as 127.0.0.2 does — is taken as another machine: no byte scan."""


def scan_files(connection, tables) -> ScanFiles:
    """The relation files of ``tables`` (and pg_statistic) to scan, or why there are none.

    Only where the files read are provably the connected server's: the host is
    this machine (:data:`LOCAL_HOSTS` or a socket path), its ``data_directory``
    is readable here, and the ``pg_control`` file there holds the server's own
    ``system_identifier`` (a data directory at the same path on this machine may
    belong to another server, e.g. behind a port forward).
    """
    host = str(connection.settings_dict.get("HOST") or "")
    if host not in LOCAL_HOSTS and not host.startswith("/"):
        return ScanFiles([], f"database server {host!r} is not on this machine")
    with connection.cursor() as cursor:
        try:
            cursor.execute("SELECT current_setting('data_directory')")
            data_dir = cursor.fetchone()[0]
        except DatabaseError:
            return ScanFiles([], "data directory not visible (needs pg_read_all_settings)")
        if not os.access(data_dir, os.R_OK | os.X_OK):
            return ScanFiles([], "data directory not readable by this process")
        other = _other_server(cursor, data_dir)
        if other:
            return ScanFiles([], other)
        paths: list[str] = []
        for table in [*tables, "pg_statistic"]:
            for rel_path, size in _relation_files(cursor, table):
                full = os.path.join(data_dir, rel_path)
                segments = _segments(full)
                if sum(file_size(p) for p in segments) < size:
                    # A rewrite (pg_repack, VACUUM FULL) by another session in flight.
                    return ScanFiles(
                        [], "relation files do not match the server's sizes", transient=True
                    )
                paths.extend(segments)
    return ScanFiles(paths)


def _relation_files(cursor, table: str) -> list[tuple[str, int]]:
    return sql_scan.relation_files(cursor, table)


def _other_server(cursor, data_dir: str) -> str:
    """Why the files under ``data_dir`` here are not the connected server's; ``""`` when
    its ``global/pg_control`` holds the server's ``system_identifier``."""
    try:
        cursor.execute("SELECT system_identifier FROM pg_control_system()")
        server = int(cursor.fetchone()[0])
    except DatabaseError:
        return "the server's system identifier is not visible (pg_control_system)"
    try:
        with open(os.path.join(data_dir, "global", "pg_control"), "rb") as handle:
            # ControlFileData begins with the uint64 system_identifier, in the
            # server's byte order (the same machine: this one's).
            (local,) = struct.unpack("=Q", handle.read(8))
    except (OSError, struct.error):
        return "data directory not readable by this process (global/pg_control)"
    if local != server:
        return f"the data directory {data_dir!r} on this machine belongs to another server"
    return ""


def _segments(path: str) -> list[str]:
    """A relation's main fork and its 1 GB continuation segments (``.1``, ``.2`` …)."""
    out = [path] if os.path.exists(path) else []
    n = 1
    while os.path.exists(f"{path}.{n}"):
        out.append(f"{path}.{n}")
        n += 1
    return out
