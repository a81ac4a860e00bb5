"""Persisted recall indexes: a cold process loads a slice's snapshot instead of rebuilding it.

``INDEXES.clear()`` leaves this process as cold as a new worker: nothing cached,
only what the database holds. Snapshots are written outside transactions only, so
these tests commit (``transaction=True``).
"""

from __future__ import annotations

import random
import sqlite3
import struct
import time
import zlib

import pytest
from django.db import connection, transaction

from memoryapp import MemoryManager
from memoryapp.compliance import erase
from memoryapp.models import RecallSnapshot
from memoryapp.recall.cache import INDEXES, live_records
from memoryapp.recall.core import snapshot as recall_snapshot
from memoryapp.recall.core.index import RecallIndex
from memoryapp.recall.core.scoring import rank_key, score
from memoryapp.recall.core.tokens import query_tokens
from tests._erasure_support import namespace_beside, stored_bytes

pytestmark = pytest.mark.django_db(transaction=True)

NS = "acme/web"
WORDS = [
    "deploy",
    "kernel",
    "backup",
    "invoice",
    "tenant",
    "schema",
    "cache",
    "worker",
    "queue",
    "billing",
    "report",
]


def _fill(mm: MemoryManager, n: int, seed: int = 3) -> None:
    rng = random.Random(seed)
    for i in range(n):
        words = rng.sample(WORDS, 4)
        mm.upsert(f"{words[0]} {words[1]} {i}", " ".join(words) + f" note {i}", [rng.choice(WORDS)])


def _brute_force(query: str, namespace: str = NS) -> list[str]:
    """The top 5 ids by scoring every live row of the slice directly (no index, no snapshot)."""
    now = time.time()
    records = list(live_records("default", namespace, "project"))
    hits = [score(r, query_tokens(query), frozenset(), now) for r in records]
    ranked = sorted((h for h in hits if h is not None), key=rank_key)
    return [h.id for h in ranked[:5]]


def _recall(query: str) -> list[str]:
    return [c.memory_id for c in MemoryManager(project=NS).recall(query)]


def test_a_cold_process_loads_the_snapshot_the_first_one_wrote():
    _fill(MemoryManager(project=NS), 60)
    INDEXES.clear()
    builds, loads, persists = INDEXES.builds, INDEXES.loads, INDEXES.persists
    first = _recall("kernel deploy")
    assert (INDEXES.builds, INDEXES.persists) == (builds + 1, persists + 1)
    assert RecallSnapshot.objects.filter(namespace=NS, scope="project", rows=60).exists()

    INDEXES.clear()  # a second worker: nothing in memory
    for query in ("kernel deploy", "billing", "queue worker cache"):
        assert _recall(query) == _brute_force(query)
    assert _recall("kernel deploy") == first
    assert INDEXES.builds == builds + 1  # the second worker built nothing
    assert INDEXES.loads == loads + 1


def test_another_writers_change_is_seen_by_a_process_loading_an_older_snapshot(raw_sql):
    mm = MemoryManager(project=NS)
    _fill(mm, 30)
    _recall("kernel")  # builds and stores the snapshot
    INDEXES.clear()
    # Another writer, outside this process's knowledge: a raw update and a new row.
    row_id = mm.search("note 7")[0].id
    raw_sql("UPDATE memories SET content = %s WHERE id = %s", ["zebra migration plan", row_id])
    mm2 = MemoryManager(project=NS)
    new = mm2.upsert("zebra crossing", "zebras everywhere")
    INDEXES.clear()
    hits = _recall("zebra")
    assert {row_id, new.id} <= set(hits)
    assert hits == _brute_force("zebra")
    assert INDEXES.loads >= 1


def test_a_rolled_back_write_never_reaches_a_snapshot():
    mm = MemoryManager(project=NS)
    _fill(mm, 20)
    _recall("kernel")
    stored = RecallSnapshot.objects.get(namespace=NS, scope="project")

    class Rollback(Exception):
        pass

    with pytest.raises(Rollback), transaction.atomic():
        mm.upsert("phantom row", "phantom zebra")
        assert [h for h in _recall("phantom")]  # seen inside the transaction
        raise Rollback
    assert RecallSnapshot.objects.get(namespace=NS, scope="project").counter == stored.counter
    INDEXES.clear()
    assert _recall("phantom") == [] == _brute_force("phantom")


@pytest.mark.sqlite_only
def test_a_restore_from_backup_brings_its_own_snapshot_back(tmp_path):
    mm = MemoryManager(project=NS)
    _fill(mm, 20)
    _recall("kernel")
    backup = tmp_path / "backup.sqlite3"
    connection.ensure_connection()
    with sqlite3.connect(backup) as target:
        connection.connection.backup(target)
    before = _brute_force("zebra kernel")
    for i in range(80):  # enough to rewrite the stored snapshot
        mm.upsert(f"zebra {i}", f"zebra kernel {i}")
    INDEXES.clear()
    _recall("zebra kernel")
    assert RecallSnapshot.objects.get(namespace=NS, scope="project").rows == 100
    with sqlite3.connect(backup) as source:  # restore: the whole file goes back
        source.backup(connection.connection)
    INDEXES.clear()  # as after any restore (README): a fresh process
    assert _recall("zebra kernel") == before == _brute_force("zebra kernel")


def test_a_snapshot_is_rewritten_once_its_slice_drifted():
    mm = MemoryManager(project=NS)
    _fill(mm, 30)
    _recall("kernel")
    first = RecallSnapshot.objects.get(namespace=NS, scope="project")
    for i in range(70):  # more than SNAPSHOT_DRIFT rows change
        mm.upsert(f"drift {i}", f"drifting row {i}")
    _recall("drifting")
    second = RecallSnapshot.objects.get(namespace=NS, scope="project")
    assert second.counter != first.counter and second.rows == 100
    INDEXES.clear()
    deltas = INDEXES.deltas
    assert _recall("drifting row") == _brute_force("drifting row")
    assert INDEXES.deltas == deltas  # current snapshot: loaded, nothing to replay


@pytest.mark.parametrize("flaw", ["format 2", "zlib stream", "token table cut"])
def test_a_snapshot_of_another_format_or_a_corrupt_one_is_rebuilt(flaw):
    _fill(MemoryManager(project=NS), 30)
    INDEXES.clear()
    _recall("kernel")
    stored = RecallSnapshot.objects.get(namespace=NS, scope="project")
    body = bytearray(bytes(stored.payload))
    if flaw == "format 2":  # the format before snapshots were stored uncompressed
        body[4:8] = (2).to_bytes(4, "little")
    elif flaw == "zlib stream":  # what formats 1 and 2 stored
        body = bytearray(zlib.compress(bytes(body), 1))
    else:
        rules = int.from_bytes(body[8:12], "little")
        at = 12 + rules
        slots, tokens, id_bytes, token_bytes = struct.unpack_from("<4I", body, at)
        start = at + 24 + id_bytes  # past the six counts
        assert bytes(body[start : start + token_bytes]).count(b"\x00") == tokens - 1 > 0
        del body[start + token_bytes - 1]  # a byte of the token table lost
        struct.pack_into("<I", body, at + 12, token_bytes - 1)
    RecallSnapshot.objects.filter(pk=stored.pk).update(payload=bytes(body))
    INDEXES.clear()
    builds, loads, persists = INDEXES.builds, INDEXES.loads, INDEXES.persists
    for query in ("kernel deploy", "billing", "queue worker cache"):
        assert _recall(query) == _brute_force(query)
    # Not served: rebuilt once, and rewritten in the current format.
    assert (INDEXES.builds, INDEXES.loads, INDEXES.persists) == (builds + 1, loads, persists + 1)
    rewritten = RecallSnapshot.objects.get(namespace=NS, scope="project")
    assert recall_snapshot.load(bytes(rewritten.payload)) is not None


def test_a_snapshot_is_not_written_for_a_slice_that_moved_meanwhile(monkeypatch):
    mm = MemoryManager(project=NS)
    _fill(mm, 10)
    real_dump = recall_snapshot.dump

    def dump_then_someone_writes(index: RecallIndex):
        data = real_dump(index)
        MemoryManager(project=NS).upsert("late writer", "written while the snapshot was cut")
        return data

    monkeypatch.setattr(recall_snapshot, "dump", dump_then_someone_writes)
    INDEXES.clear()
    _recall("kernel")
    assert not RecallSnapshot.objects.filter(namespace=NS).exists()


def test_erasure_deletes_the_snapshot_and_purges_its_bytes():
    mm = MemoryManager(project=NS)
    _fill(mm, 40)
    mm.upsert("zyxwvutsrqponm", "Procedures of Plmoknijbuhvygc")  # a one-word title: a probe
    # A kept tenant stored beside acme (same files) whose text holds that word only
    # capitalised: its snapshot keeps the lower-cased token, which no kept row holds
    # byte for byte, and the byte scan reads it.
    globex = namespace_beside(NS, "globex/web")
    other = MemoryManager(project=globex)
    _fill(other, 10, seed=9)
    other.upsert("quarterly", "ZYXWVUTSRQPONM quarterly figures")
    INDEXES.clear()
    _recall("kernel")
    other.recall("kernel")
    payload = bytes(RecallSnapshot.objects.get(namespace=NS, scope="project").payload)
    strings = recall_snapshot.strings(payload)
    token = b"zyxwvutsrqponm"
    assert token in strings.split(b"\x00") and token in payload  # stored as it is
    acme_only = b"plmoknijbuhvygc"  # acme's only, and only as a token in lower case
    assert acme_only in strings.split(b"\x00") and acme_only in payload

    receipt = erase(namespace=NS, actor="test")
    assert not RecallSnapshot.objects.filter(namespace=NS).exists()
    kept = bytes(RecallSnapshot.objects.get(namespace=globex).payload)  # not erased
    assert token in kept
    # Verified although the scan finds globex's token: a kept snapshot explains it.
    assert receipt.verified, receipt
    assert acme_only not in stored_bytes(["memory_recall_snapshots", "memories"])


def test_memory_index_stores_every_namespace_ahead_of_traffic_and_drop_removes_them():
    from io import StringIO

    from django.core.management import call_command

    _fill(MemoryManager(project=NS), 12)
    _fill(MemoryManager(project="globex/web", user="globex/bob"), 8, seed=5)
    MemoryManager(project="globex/web", user="globex/bob").upsert("editor", "vim", ["preference"])

    def run(*args) -> str:
        out = StringIO()
        call_command("memory", "index", *args, stdout=out)
        return out.getvalue()

    assert "3 namespace slice(s): 3 built and stored" in run("--all-namespaces")
    assert set(RecallSnapshot.objects.values_list("namespace", "scope")) == {
        (NS, "project"),
        ("globex/web", "project"),
        ("globex/bob", "user"),
    }
    assert "0 built and stored, 3 already stored" in run("--all-namespaces")
    assert "1 namespace slice(s): 0 built" in run("--project", NS)
    assert "Deleted 1 recall snapshot(s)" in run("--drop", "--yes", "--project", NS)
    assert RecallSnapshot.objects.count() == 2
    INDEXES.clear()
    assert _recall("kernel") == _brute_force("kernel")  # rebuilt on demand


def test_a_snapshot_reads_back_byte_for_byte_inside_and_outside_a_transaction():
    from memoryapp.db import snapshots

    payload = bytes(range(256)) * 600  # every byte value; ~150 KB like 1,000 memories' snapshot
    RecallSnapshot.objects.create(
        namespace=NS,
        scope="project",
        counter=7,
        watermark=1.5,
        rows=1,
        payload=payload,
        written_at=0.0,
    )
    stored = snapshots.read("default", NS, "project")
    assert (stored.counter, stored.watermark, stored.payload) == (7, 1.5, payload)
    assert type(stored.payload) is bytes
    with transaction.atomic():  # the same connection: an uncommitted change is seen
        RecallSnapshot.objects.filter(namespace=NS).update(payload=payload[::-1])
        assert snapshots.read("default", NS, "project").payload == payload[::-1]
    assert snapshots.read("default", "nobody/here", "project") is None


@pytest.mark.postgres_only
def test_postgresql_stores_snapshots_out_of_line_and_uncompressed():
    _fill(MemoryManager(project=NS), 60)
    INDEXES.clear()
    _recall("kernel")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, a.attstorage FROM pg_attribute a "
            "JOIN pg_class c ON c.oid = a.attrelid WHERE a.attname = 'payload' "
            "AND c.relname LIKE 'memory\\_recall\\_snapshots%%'"
        )
        storage = dict(cursor.fetchall())
        # No pglz on the server: the bytes in TOAST are the snapshot's own.
        cursor.execute(
            "SELECT pg_column_compression(payload), length(payload) "
            "FROM memory_recall_snapshots WHERE namespace = %s",
            [NS],
        )
        compression, length = cursor.fetchone()
    assert len(storage) == 65  # the partitioned table and its 64 partitions
    assert set(storage.values()) == {"e"}  # EXTERNAL
    assert compression is None and length > 2000  # long enough to be TOASTed


def test_a_cold_recall_reads_its_snapshot_with_the_counter(monkeypatch):
    """One statement gives a cold slice its counter and its snapshot; a warm one only reads
    its counter; both answer as a full scan would."""
    from memoryapp.db import snapshots as stored_snapshots

    mm = MemoryManager(project=NS, user="acme/bob")
    _fill(MemoryManager(project=NS), 40)
    mm.upsert("user_kernel", "bob tunes the kernel", ["kernel"])
    _recall("kernel")  # builds and stores the project snapshot
    INDEXES.clear()
    statements = []
    real_with = stored_snapshots.read_with_counters

    def with_counters(alias, slices, wanted):
        statements.append((sorted(slices), sorted(wanted)))
        return real_with(alias, slices, wanted)

    def refuse(*args):
        raise AssertionError("the snapshot was read on its own")

    monkeypatch.setattr(stored_snapshots, "read_with_counters", with_counters)
    monkeypatch.setattr(stored_snapshots, "read", refuse)
    loads, builds = INDEXES.loads, INDEXES.builds
    assert _recall("kernel deploy") == _brute_force("kernel deploy")
    assert statements == [([(NS, "project")], [(NS, "project")])]
    assert (INDEXES.loads, INDEXES.builds) == (loads + 1, builds)

    # Warm: the counter alone. A user slice without a snapshot is built, not read twice.
    statements.clear()
    hits = [c.title for c in mm.recall("kernel tunes")]
    assert "user_kernel" in hits
    assert statements == [([("acme/bob", "user"), (NS, "project")], [("acme/bob", "user")])]
    assert INDEXES.builds == builds + 1
    statements.clear()
    _recall("kernel")
    assert statements == []


def test_read_with_counters_answers_per_slice(raw_sql):
    from memoryapp.db import snapshots as stored_snapshots

    _fill(MemoryManager(project=NS), 10)
    _recall("kernel")  # a stored snapshot for the project slice
    MemoryManager(project="beta/web").upsert("beta_only", "no snapshot here")
    slices = [(NS, "project"), ("beta/web", "project"), ("never/written", "project")]
    counters, stored = stored_snapshots.read_with_counters("default", slices, slices)
    expected = dict(
        raw_sql(
            "SELECT namespace, value FROM memory_slice_changes WHERE scope = 'project'"
            " AND namespace IN (%s, %s)",
            [NS, "beta/web"],
        )
    )
    assert counters == {
        (NS, "project"): int(expected[NS]),
        ("beta/web", "project"): int(expected["beta/web"]),
        ("never/written", "project"): 0,
    }
    snapshot = RecallSnapshot.objects.get(namespace=NS, scope="project")
    assert set(stored) == {(NS, "project"), ("beta/web", "project")}  # counter rows only
    assert stored[("beta/web", "project")] is None
    got = stored[(NS, "project")]
    assert (got.counter, got.payload) == (snapshot.counter, bytes(snapshot.payload))
    # Not wanted: counters only, no payload read.
    assert stored_snapshots.read_with_counters("default", slices, []) == (counters, {})


def test_memory_index_builds_in_parallel_processes():
    """``--jobs N``: N forked processes share the slices; the result is the one-process one."""
    from io import StringIO

    from django.core.management import call_command

    for t in range(5):
        _fill(MemoryManager(project=f"tenant{t}/web"), 6 + t, seed=t)

    def run(*args) -> str:
        out = StringIO()
        call_command("memory", "index", "--all-namespaces", *args, stdout=out)
        return out.getvalue()

    assert "5 namespace slice(s): 5 built and stored, 0 already" in run("--jobs", "2")
    stored = dict(RecallSnapshot.objects.values_list("namespace", "rows"))
    assert stored == {f"tenant{t}/web": 6 + t for t in range(5)}
    assert "0 built and stored, 5 already stored" in run("--jobs", "8")  # more jobs than slices
    INDEXES.clear()
    builds, loads = INDEXES.builds, INDEXES.loads
    for t in range(5):  # a worker loads what the children stored, and answers as a scan
        hits = MemoryManager(project=f"tenant{t}/web").recall("kernel deploy")
        assert [h.memory_id for h in hits] == _brute_force("kernel deploy", f"tenant{t}/web")
    assert (INDEXES.builds, INDEXES.loads) == (builds, loads + 5)
    with pytest.raises(SystemExit):
        run("--jobs", "0")


def test_a_turn_that_will_not_score_reads_no_snapshot(monkeypatch):
    """An empty query (or no top_k) recalls nothing: its turn reads the counters for the
    stable block, not the cold slice's snapshot it would throw away."""
    from memoryapp.db import snapshots as stored_snapshots

    _fill(MemoryManager(project=NS), 20)
    _recall("kernel")  # a stored snapshot
    INDEXES.clear()
    wanted = []
    real = stored_snapshots.read_with_counters
    monkeypatch.setattr(
        stored_snapshots,
        "read_with_counters",
        lambda alias, slices, cold: wanted.append(list(cold)) or real(alias, slices, cold),
    )
    loads = INDEXES.loads
    for query in ("", "   ", "?!"):
        candidates, context = MemoryManager(project=NS).recall_turn(query, top_k=5)
        assert candidates == [] and context == ""
    assert wanted == [] and INDEXES.loads == loads  # counters alone, no snapshot
    candidates, _ = MemoryManager(project=NS).recall_turn("kernel", top_k=3)  # scores: reads it
    assert candidates and wanted[-1] == [(NS, "project")] and INDEXES.loads == loads + 1
