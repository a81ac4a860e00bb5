"""Typed, live accessors for the ``MEMORYAPP_*`` settings (never cached, never written)."""

from __future__ import annotations

import contextlib
import contextvars
from functools import lru_cache
from typing import TYPE_CHECKING

from django.conf import settings
from django.utils.module_loading import import_string

from memoryapp.recall.core.rankings import RANKINGS, check_ranking

if TYPE_CHECKING:
    from memoryapp.rules.guard import MemoryGuard


def guard_class_path() -> str:
    """``MEMORYAPP_GUARD``: dotted path of the guard class used everywhere.

    The manager, the admin and the API all build their guard from this, so a
    host's stricter subclass of :class:`memoryapp.rules.guard.MemoryGuard` applies
    to every write path. Default ``"memoryapp.rules.guard.MemoryGuard"``.
    """
    return getattr(settings, "MEMORYAPP_GUARD", "memoryapp.rules.guard.MemoryGuard")


@lru_cache(maxsize=8)
def _import_guard(path: str) -> type[MemoryGuard]:
    return import_string(path)


def get_guard() -> MemoryGuard:
    """Return a fresh instance of the configured guard class."""
    return _import_guard(guard_class_path())()


def user_database() -> str | None:
    """``MEMORYAPP_USER_DATABASE``: alias of the database holding user-scope memories.

    The seed keeps user memories in a second, user-global store. ``None`` (the
    default) keeps both scopes in the manager's ``using`` database.
    """
    return getattr(settings, "MEMORYAPP_USER_DATABASE", None) or None


def auto_source_cap() -> int:
    """``MEMORYAPP_AUTO_CAP``: how many ``auto``-source memories a scope keeps (default 50)."""
    return int(getattr(settings, "MEMORYAPP_AUTO_CAP", 50))


def recall_cache_bytes() -> int:
    """``MEMORYAPP_RECALL_CACHE_BYTES``: memory cap of the per-namespace recall indexes.

    Least recently used namespace indexes are dropped past it. Default 256 MiB.
    """
    return int(getattr(settings, "MEMORYAPP_RECALL_CACHE_BYTES", 256 * 1024 * 1024))


def recall_snapshots() -> bool:
    """``MEMORYAPP_RECALL_SNAPSHOTS``: persist recall indexes so cold processes load them.

    On (the default), a process that builds a slice's index stores it in
    ``memory_recall_snapshots`` and any other process, on any machine, loads it
    and applies the rows changed since; off, every process builds its own.
    """
    return bool(getattr(settings, "MEMORYAPP_RECALL_SNAPSHOTS", True))


def recall_ranking(ranking: str | None = None) -> str:
    """The recall ranking of a call: ``ranking`` when given, else ``MEMORYAPP_RECALL_RANKING``.

    ``agentao`` (the default) is Agentao's exact formula (docs/behaviour.md §5);
    ``hybrid`` is :mod:`memoryapp.recall.core.hybrid`; ``semantic`` is
    :mod:`memoryapp.recall.core.semantic`, served only with an embedder (:func:`embedder`).
    All run on the same per-namespace index.

    Raises:
        ValueError: the value (given or configured) names no ranking, or ``semantic``
            without an embedder (never a silent fallback).
    """

    if ranking is None:
        ranking = getattr(settings, "MEMORYAPP_RECALL_RANKING", "agentao")
    ranking = check_ranking(ranking)
    if ranking == "semantic":
        problem = embedder_problem()
        if problem is not None:
            raise ValueError(f"the semantic recall ranking is not served here: {problem}")
    return ranking


def embedder_spec() -> str:
    """``MEMORYAPP_EMBEDDER``: the embedder of the ``semantic`` ranking and of stored vectors.

    ``wordllama`` (the default) is the model the ``semantic`` extra ships; a directory
    names a model2vec or Sentence-Transformers model; anything else a dotted path to a
    callable (:func:`memoryapp.recall.core.embedding.load`); ``none`` (or empty) turns
    embeddings off: no vectors written, ``semantic`` refused.
    """
    return str(getattr(settings, "MEMORYAPP_EMBEDDER", "wordllama") or "none").strip()


@lru_cache(maxsize=4)
def _load_embedder(spec: str):
    from memoryapp.recall.core.embedding import EmbedderUnavailable, load

    if spec.lower() == "none":
        return None, "MEMORYAPP_EMBEDDER is none"
    try:
        return load(spec), None
    except EmbedderUnavailable as exc:
        return None, str(exc)
    except Exception as exc:  # a callable that raises, a wrong shape, a corrupt file
        # Reported (system check, refusal of semantic), never raised at every write.
        return None, f"MEMORYAPP_EMBEDDER {spec!r} does not load: {type(exc).__name__}: {exc}"


def embedder():
    """The configured :class:`~memoryapp.recall.core.embedding.Embedder`, loaded once per
    spec; None when embeddings are off or it cannot load (:func:`embedder_problem`)."""
    return _load_embedder(embedder_spec())[0]


def embedder_problem() -> str | None:
    """Why no embedder is served (None when one is): the extra missing, a bad path."""
    return _load_embedder(embedder_spec())[1]


def served_rankings() -> tuple[str, ...]:
    """The rankings this server answers: ``semantic`` only with an embedder."""
    return tuple(r for r in RANKINGS if r != "semantic" or embedder_problem() is None)


def ephemeral_database() -> str:
    """``MEMORYAPP_EPHEMERAL_DATABASE``: alias of the in-memory store of ephemeral managers.

    Registered on first use when the project does not declare it (declaring it
    in ``DATABASES`` lets test suites list it). Default ``"memoryapp_ephemeral"``.
    """
    return getattr(settings, "MEMORYAPP_EPHEMERAL_DATABASE", "memoryapp_ephemeral")


# --- read replicas (memoryapp.db.replicas; docs/operations.md) -----------------


def replica_databases() -> list[str]:
    """``MEMORYAPP_REPLICA_DATABASES``: aliases of read-only streaming replicas of ``default``.

    The lag-tolerant reads (recall index builds and snapshot loads, API and admin lists,
    exports) may be served by one of them; everything else reads the primary. The
    project's settings fill it from ``DATABASE_REPLICA_URLS`` (``replica_1``, ...).
    Default: none.
    """
    return list(getattr(settings, "MEMORYAPP_REPLICA_DATABASES", None) or [])


def replica_max_lag() -> float:
    """``MEMORYAPP_REPLICA_MAX_LAG``: seconds a replica may trail the primary and still serve.

    Measured as the primary's WAL position against the replica's replayed one, and then
    the time since the replica's last replayed commit. Default 5.
    """
    return float(getattr(settings, "MEMORYAPP_REPLICA_MAX_LAG", 5.0))


def replica_check_interval() -> float:
    """``MEMORYAPP_REPLICA_CHECK_INTERVAL``: seconds a replica's measured lag is reused.

    One measurement (a query on the primary and one on the replica) per replica per
    process at most this often; an unreachable replica is retried after 5 times as long.
    Default 1.
    """
    return float(getattr(settings, "MEMORYAPP_REPLICA_CHECK_INTERVAL", 1.0))


def replica_sticky_seconds() -> float:
    """``MEMORYAPP_REPLICA_STICKY_SECONDS``: how long a client's last write position is kept.

    For that long after a request that wrote, the same client (API token, session, else
    address) reads a replica only once it has replayed that write. Default 60.
    """
    return float(getattr(settings, "MEMORYAPP_REPLICA_STICKY_SECONDS", 60.0))


# --- erasure, retention, export (memoryapp.compliance; docs/compliance.md) -----

_DERIVED_KEY_LABEL = b"memoryapp.compliance.receipt-key.v1"


def _derive_from_secret(secret: str | bytes) -> bytes:
    import hashlib
    import hmac

    raw = secret.encode() if isinstance(secret, str) else bytes(secret)
    return hmac.new(raw, _DERIVED_KEY_LABEL, hashlib.sha256).digest()


def _as_key(value: str | bytes) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


def erasure_key() -> bytes:
    """``MEMORYAPP_ERASURE_KEY``: the HMAC key that pseudonymises subjects in erasure receipts.

    A receipt records the erased subject and namespace only as
    ``HMAC-SHA256(key, value)``, so it can be matched again (``memory erase
    --replay`` after restoring a backup, "was alice erased?") without holding
    the key in clear. Default: a key derived from ``SECRET_KEY``.

    Caveat of the default: rotating ``SECRET_KEY`` changes the derived key, and
    receipts written before the rotation can then only be replayed by their
    recorded ids (not by subject) unless the old secret stays in
    ``SECRET_KEY_FALLBACKS``. Set a dedicated, stable key in production and
    keep it as secret as ``SECRET_KEY``: with it, anyone holding the receipts
    can test whether a *guessed* user key was erased.
    """
    value = getattr(settings, "MEMORYAPP_ERASURE_KEY", None)
    if value:
        return _as_key(value)
    return _derive_from_secret(settings.SECRET_KEY)


def erasure_key_fallbacks() -> list[bytes]:
    """``MEMORYAPP_ERASURE_KEY_FALLBACKS``: older receipt keys, tried when replaying.

    Default: the keys derived from ``SECRET_KEY_FALLBACKS`` (and, when a
    dedicated ``MEMORYAPP_ERASURE_KEY`` is set, the key derived from
    ``SECRET_KEY``, so switching from the default to a dedicated key keeps
    earlier receipts replayable).
    """
    explicit = getattr(settings, "MEMORYAPP_ERASURE_KEY_FALLBACKS", None)
    if explicit is not None:
        return [_as_key(v) for v in explicit if v]
    keys = [_derive_from_secret(s) for s in getattr(settings, "SECRET_KEY_FALLBACKS", ()) if s]
    if getattr(settings, "MEMORYAPP_ERASURE_KEY", None):
        keys.append(_derive_from_secret(settings.SECRET_KEY))
    return keys


def erasure_ledger_path() -> str | None:
    """``MEMORYAPP_ERASURE_LEDGER``: a file that receives every erasure receipt as a JSON line.

    Receipts also live in the database, but a database restored from a backup
    taken before an erasure has lost that erasure's receipt; ``memory erase
    --replay`` reads this file to re-apply it. Put it on storage that is *not*
    restored with the database. ``None`` (default): no ledger file.
    """
    value = getattr(settings, "MEMORYAPP_ERASURE_LEDGER", None)
    return str(value) if value else None


def erasure_purge_timeout() -> float:
    """``MEMORYAPP_ERASURE_PURGE_TIMEOUT``: seconds the vendor purge may wait for other sessions.

    SQLite: how long ``PRAGMA wal_checkpoint(TRUNCATE)`` is retried while
    another connection holds a read transaction. PostgreSQL: the
    ``lock_timeout`` of each ``VACUUM FULL``. Past it, the receipt says
    ``not purged: <reason>`` and the purge can be retried. Default 10.
    """
    return float(getattr(settings, "MEMORYAPP_ERASURE_PURGE_TIMEOUT", 10.0))


def erasure_full_rewrite_interval() -> float:
    """``MEMORYAPP_ERASURE_FULL_REWRITE_INTERVAL``: seconds between two rewrites of every
    tenant's rows that erasures may start (an escalation to the whole tables on
    PostgreSQL, to a ``VACUUM`` of the file on SQLite).

    Such a rewrite holds every partition's ``ACCESS EXCLUSIVE`` lock in turn, so
    anyone with an erase grant could otherwise start one per erasure. The last
    start is kept in the database (``schema_meta``), for every process; an
    erasure that needs one sooner waits (its receipt says until when) and is
    retried then. The configured purge of the partitions that held the erased
    rows is never limited. Default 3600; 0 removes the limit.
    """
    return max(0.0, float(getattr(settings, "MEMORYAPP_ERASURE_FULL_REWRITE_INTERVAL", 3600.0)))


def erasure_worker() -> bool:
    """``MEMORYAPP_ERASURE_WORKER``: leave the purge and verification of HTTP and admin
    erasures to ``manage.py memory worker``.

    On, ``POST /api/erasures/`` answers ``202 Accepted`` as soon as the rows are
    deleted (the receipt says ``deleted``) and the worker purges, verifies and
    completes it; ``GET /api/erasures/{id}/`` shows how far it has gone. Off
    (default), the request waits for the purge and answers ``201`` with the
    finished receipt — fine in development and for small databases.
    """
    return bool(getattr(settings, "MEMORYAPP_ERASURE_WORKER", False))


def erasure_worker_lease() -> float:
    """``MEMORYAPP_ERASURE_WORKER_LEASE``: seconds a worker holds the receipts it claimed.

    A worker that dies (``kill -9``, a lost machine) keeps its claim this long,
    after which another worker takes the receipts over; a restarted worker on the
    same host takes over at once (it sees the old process is gone). It must
    outlast one purge: default ten purge timeouts, at least 5 minutes.
    """
    default = max(300.0, 10 * erasure_purge_timeout())
    return float(getattr(settings, "MEMORYAPP_ERASURE_WORKER_LEASE", default))


def erasure_max_attempts() -> int:
    """``MEMORYAPP_ERASURE_MAX_ATTEMPTS``: automatic attempts at an erasure before it waits for
    a person.

    Each attempt that does not end verified (a purge that failed, residue the byte
    scan found, an unexpected error) counts. After this many the receipt's state
    becomes ``needs_attention``: the worker stops retrying it, ``/healthz`` says
    ``degraded`` and the admin shows what to do (``memory erase --retry <id>``, or
    the receipt's "Retry now"). Default 8 (about 10 minutes of backoff).
    """
    return max(1, int(getattr(settings, "MEMORYAPP_ERASURE_MAX_ATTEMPTS", 8)))


def erasure_retry_delay() -> float:
    """``MEMORYAPP_ERASURE_RETRY_DELAY``: seconds of the first backoff after a failed attempt.

    Each further failure doubles it, up to ``MEMORYAPP_ERASURE_RETRY_MAX_DELAY``;
    the actual wait is drawn between half and all of it (jitter). Default 5.
    """
    return max(0.0, float(getattr(settings, "MEMORYAPP_ERASURE_RETRY_DELAY", 5.0)))


def erasure_retry_max_delay() -> float:
    """``MEMORYAPP_ERASURE_RETRY_MAX_DELAY``: the longest backoff between two attempts, in
    seconds. Default 600."""
    return max(0.0, float(getattr(settings, "MEMORYAPP_ERASURE_RETRY_MAX_DELAY", 600.0)))


def erasure_stale_after() -> float:
    """``MEMORYAPP_ERASURE_STALE_AFTER``: seconds after which an unfinished erasure is reported.

    A receipt still ``requested`` or ``deleted`` this long after it was asked for
    (no worker runs, or its retries keep failing) makes ``/healthz`` say
    ``degraded`` and the admin overview show a banner, as one needing attention
    does. Default 3600 (1 hour).
    """
    return max(1.0, float(getattr(settings, "MEMORYAPP_ERASURE_STALE_AFTER", 3600.0)))


def copy_claim_seconds() -> float:
    """``MEMORYAPP_COPY_CLAIM_SECONDS``: how long a checker holds a copy check it scans.

    A worker or ``memory verifier`` claims a (receipt, server) row before scanning that
    server; another checker skips it until the claim expires, then takes it over (the
    first one died mid-scan). Longer than a scan takes, replay wait included (a scan
    that outlives its claim has its result discarded). Default 600 (10 minutes).
    """
    return max(1.0, float(getattr(settings, "MEMORYAPP_COPY_CLAIM_SECONDS", 600.0)))


def copy_report_after() -> float:
    """``MEMORYAPP_COPY_REPORT_AFTER``: seconds after which a server that has not reported
    its check of an erasure is shown as late.

    A copy (a replica, or a server checked by ``memory verifier``) still ``not checked``
    this long after the primary's purge was verified appears on ``/healthz`` (with the
    token), ``/metrics`` and the admin overview. Default 3600 (1 hour).
    """
    return max(1.0, float(getattr(settings, "MEMORYAPP_COPY_REPORT_AFTER", 3600.0)))


def replica_replay_wait() -> float:
    """``MEMORYAPP_REPLICA_REPLAY_WAIT``: seconds an erasure waits for each replica to replay
    it before checking that replica's files (default 10). One that has not replayed by
    then stays ``not checked`` and the worker checks it at a later round."""
    return max(0.0, float(getattr(settings, "MEMORYAPP_REPLICA_REPLAY_WAIT", 10.0)))


def copy_verifiers() -> list[str]:
    """``MEMORYAPP_COPY_VERIFIERS``: the database aliases whose files ``manage.py memory
    verifier`` checks beside the server (comma-separated; default none).

    A server the worker cannot read (neither locally nor through SQL) waits ``not
    checked`` for its verifier when it is listed here; otherwise its check is
    ``rewritten, not scanned`` with the reason.
    """
    value = getattr(settings, "MEMORYAPP_COPY_VERIFIERS", ()) or ()
    if isinstance(value, str):
        value = value.split(",")
    return [v.strip() for v in value if v.strip()]


PURGE_METHODS = ("auto", "online", "rewrite")

# ``memory erase --retry --method rewrite``: one retry run with another purge method,
# without changing the settings of the process (a context variable, not a global).
_purge_method_override: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "memoryapp_purge_method_override", default=None
)


@contextlib.contextmanager
def purge_method(method: str):
    """Within the block, :func:`erasure_purge_method` answers ``method`` (one of PURGE_METHODS)."""
    if method not in PURGE_METHODS:
        raise ValueError(f"the purge method must be one of {', '.join(PURGE_METHODS)}")
    token = _purge_method_override.set(method)
    try:
        yield
    finally:
        _purge_method_override.reset(token)


def erasure_purge_method() -> str:
    """``MEMORYAPP_ERASURE_PURGE_METHOD``: how the vendor purge removes an erasure's bytes.

    - ``"auto"`` (default): SQLite frees the erased pages with ``PRAGMA
      incremental_vacuum`` (``secure_delete`` already zeroed them; the first
      purge converts the file to ``auto_vacuum=INCREMENTAL`` with one
      ``VACUUM``); PostgreSQL rewrites the tables with ``pg_repack``, other
      sessions keep reading and writing, and falls back to ``VACUUM FULL``
      (saying so on the receipt) when pg_repack is not installed.
    - ``"online"``: as ``"auto"``, but on PostgreSQL a missing pg_repack
      leaves the receipt ``not purged`` instead of falling back.
    - ``"rewrite"``: the heavyweight method: ``VACUUM`` of the whole
      SQLite file, ``VACUUM FULL`` of each PostgreSQL table (an ``ACCESS
      EXCLUSIVE`` lock for the whole rewrite). Use it on a SQLite file that
      a program without ``secure_delete`` also writes.

    See docs/compliance.md §3 and bench/ERASURE.md.
    """
    override = _purge_method_override.get()
    if override is not None:
        return override
    value = str(getattr(settings, "MEMORYAPP_ERASURE_PURGE_METHOD", "auto") or "auto").lower()
    if value not in PURGE_METHODS:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(
            f"MEMORYAPP_ERASURE_PURGE_METHOD must be one of {', '.join(PURGE_METHODS)}, "
            f"not {value!r}"
        )
    return value


def _days(name: str, default: int | None) -> int | None:
    value = getattr(settings, name, default)
    if value is None or value == "":
        return None
    days = int(value)
    if days < 0:
        raise ValueError(f"{name} must be a number of days >= 0 or None")
    return days


def retention_deleted_memories_days() -> int | None:
    """``MEMORYAPP_RETENTION_DELETED_MEMORIES_DAYS``: days a soft-deleted memory is kept.

    Soft-deleted memories still hold their content (docs/behaviour.md §3). ``memory
    purge-expired`` erases — for real, with a receipt — those deleted longer
    ago than this. ``None`` keeps them forever. Default 30.
    """
    return _days("MEMORYAPP_RETENTION_DELETED_MEMORIES_DAYS", 30)


def retention_review_items_days() -> int | None:
    """``MEMORYAPP_RETENTION_REVIEW_ITEMS_DAYS``: days an approved/rejected review item is kept.

    Decided review items keep their evidence (excerpts of user messages);
    ``memory purge-expired`` erases those decided longer ago than this. Pending
    items are never expired. ``None`` keeps them forever. Default 30.
    """
    return _days("MEMORYAPP_RETENTION_REVIEW_ITEMS_DAYS", 30)


def retention_session_summaries_days() -> int | None:
    """``MEMORYAPP_RETENTION_SESSION_SUMMARIES_DAYS``: days a session summary is kept.

    Summaries feed the cross-session tail of the prompt, so they are kept
    forever by default (``None``); set a number of days to expire them with
    ``memory purge-expired``.
    """
    return _days("MEMORYAPP_RETENTION_SESSION_SUMMARIES_DAYS", None)


def export_purposes() -> str:
    """``MEMORYAPP_EXPORT_PURPOSES``: the purposes statement put into every export document.

    Default: a neutral description of what agent memory is used for; operators
    should replace it with the wording of their privacy notice.
    """
    return getattr(
        settings,
        "MEMORYAPP_EXPORT_PURPOSES",
        "Long-term memory of an AI assistant: facts, preferences and decisions saved "
        "during conversations are recalled into later conversations of the same user "
        "or project. Session summaries carry context from one conversation to the next. "
        "Review items are candidate memories awaiting a human decision. Events are an "
        "audit log of writes (ids and times, never content).",
    )
