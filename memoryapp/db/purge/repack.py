"""Running ``pg_repack`` for the PostgreSQL purge: its version, its environment, a bounded run."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from functools import lru_cache


@lru_cache(maxsize=4)
def repack_version_of(path: str) -> str:
    """The version the pg_repack program at ``path`` reports ("" if it does not run)."""
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    words = (done.stdout or "").split()
    return words[-1] if done.returncode == 0 and words else ""


def repack_client_version() -> str:
    """The pg_repack program's version, "" when there is none on the PATH."""
    path = shutil.which("pg_repack")
    return repack_version_of(path) if path else ""


# The libpq parameters of the app's connection, as the environment variables that
# give them to another libpq program. pg_repack takes the database as a plain name
# (a connection string works for its first connection only), so everything goes
# through the environment; the password too, as command lines are visible to every
# local user.
LIBPQ_ENV = {
    "host": "PGHOST", "hostaddr": "PGHOSTADDR", "port": "PGPORT", "dbname": "PGDATABASE",
    "user": "PGUSER", "password": "PGPASSWORD", "passfile": "PGPASSFILE",
    "service": "PGSERVICE", "connect_timeout": "PGCONNECT_TIMEOUT", "sslmode": "PGSSLMODE",
    "sslrootcert": "PGSSLROOTCERT", "sslcert": "PGSSLCERT", "sslkey": "PGSSLKEY",
    "sslcrl": "PGSSLCRL", "gssencmode": "PGGSSENCMODE",
    "target_session_attrs": "PGTARGETSESSIONATTRS",
}  # fmt: skip


def repack_env(connection) -> dict[str, str]:
    """This process's environment with the app's connection parameters as ``PG*`` variables."""
    env = {k: v for k, v in os.environ.items() if k not in LIBPQ_ENV.values()}
    for key, value in connection.get_connection_params().items():
        if key in LIBPQ_ENV and value not in (None, ""):
            env[LIBPQ_ENV[key]] = str(value)
    env["PGAPPNAME"] = "memoryapp erasure purge"
    return env


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass
class RepackRun:
    """How one pg_repack run ended: exit code, its output lines, what it waited for too long."""

    code: int
    output: list[str]
    waited_for: str = ""

    def problem(self) -> str:
        """The last ERROR or WARNING line of the output (or its last line)."""
        for line in reversed(self.output):
            if line.startswith(("ERROR", "WARNING", "FATAL")) or "Skipping" in line:
                return line
        return self.output[-1] if self.output else f"exit code {self.code}"


def run_repack(command: list[str], env: dict[str, str], timeout: float) -> RepackRun:
    """Run pg_repack; interrupt it when it waits for other transactions longer than ``timeout``.

    Before copying a table pg_repack waits, without a time limit, for every
    transaction that was running when it installed its trigger ("Waiting for
    N transactions to finish"). A session left idle in a transaction would
    hold the erasure for ever, so after ``timeout`` seconds of that the
    program is interrupted (SIGINT: it drops its trigger and log table) and
    the purge reports what it waited for.
    """
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    output = process.stdout
    assert output is not None  # stdout=PIPE
    lines: list[str] = []
    waiting: list[float | None] = [None]  # when the current wait began

    def read() -> None:
        for raw in output:
            line = raw.strip()
            lines.append(line)
            if "Waiting for" in line:
                waiting[0] = waiting[0] or time.monotonic()
            else:
                waiting[0] = None

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    waited_for = ""
    while process.poll() is None:
        began = waiting[0]
        if began is not None and time.monotonic() - began > timeout:
            waited_for = describe_wait(lines)
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
            break
        time.sleep(0.05)
    process.wait()
    reader.join(timeout=5)
    return RepackRun(process.returncode, lines, waited_for)


def describe_wait(lines: list[str]) -> str:
    """'1 transaction (first pid 123)' from pg_repack's last "Waiting for" line."""
    line = next((ln for ln in reversed(lines) if "Waiting for" in ln), "")
    words = line.split()
    try:
        count = words[words.index("for") + 1]
        pid = words[words.index("PID:") + 1]
    except (ValueError, IndexError):
        return "transactions open since it began"
    return f"{count} transaction(s) (first pid {pid})"
