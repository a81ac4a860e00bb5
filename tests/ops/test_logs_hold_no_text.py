"""No log record carries a memory's text, with Django's SQL log at DEBUG.

Django logs each statement on ``django.db.backends`` with its values; the app's
filter (``memoryapp.ops.logs``) must take them out before any handler sees them.
"""

from __future__ import annotations

import json
import logging

import pytest
from django.db import connection

from memoryapp import MemoryManager
from memoryapp.compliance import erase
from memoryapp.ops.logs import redact_sql
from memoryapp.rules.errors import SensitiveMemoryError

pytestmark = pytest.mark.django_db

TEXTS = ("violetcomet", "ambertundra", "cobaltfjord")
NS = "logs/acme"


def _everything(record: logging.LogRecord) -> str:
    """All a handler could write of ``record``: message, arguments, extra attributes."""
    parts = [record.getMessage(), repr(record.args), record.exc_text or ""]
    parts += [repr(v) for k, v in vars(record).items() if k not in ("msg", "args")]
    return "\n".join(parts)


@pytest.fixture
def sql_log(caplog):
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="django.db.backends")  # Django sets it to INFO
    old = connection.force_debug_cursor
    connection.force_debug_cursor = True  # what DEBUG=True does: log every statement
    yield caplog
    connection.force_debug_cursor = old


def _refuse_inserts():
    """A database that refuses new memories (a failing write)."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                "CREATE TRIGGER trg_test_refuse BEFORE INSERT ON memories "
                "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
            )
        else:
            cursor.execute(
                "CREATE FUNCTION test_refuse() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$"
            )
            cursor.execute(
                "CREATE TRIGGER trg_test_refuse BEFORE INSERT ON memories "
                "FOR EACH ROW EXECUTE FUNCTION test_refuse()"
            )


def test_a_failing_write_a_refused_secret_and_an_erasure_log_no_text(sql_log):
    mm = MemoryManager(project=NS, user="logs/alice")
    mm.save_memory("travel plan", f"flying to {TEXTS[0]} in May", scope="user")
    with pytest.raises(SensitiveMemoryError):
        mm.upsert(f"aws {TEXTS[1]}", "AKIAIOSFODNN7EXAMPLE wJalrXUtnFI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    erase(subject="logs/alice")
    with connection.cursor() as cursor:  # control: the SQL log is on and sees values
        cursor.execute("SELECT %s", [TEXTS[2]])
    _refuse_inserts()
    with pytest.raises(Exception, match="refused by the test"):
        mm.upsert("second plan", f"then {TEXTS[2]} in June")

    db_records = [r for r in sql_log.records if r.name == "django.db.backends"]
    assert len(db_records) > 10, "the SQL log did not run"
    assert any("'…'" in r.getMessage() for r in db_records)
    for record in sql_log.records:
        text = _everything(record)
        leaked = [t for t in TEXTS if t in text]
        assert not leaked, f"{record.name}: {record.getMessage()[:300]}"


def test_redaction_keeps_the_statement_shape():
    sql = "INSERT INTO memories (id, content) VALUES ('ab12', 'it''s secret'), (3, E'x\\n')"
    assert redact_sql(sql) == "INSERT INTO memories (id, content) VALUES ('…', '…'), (3, '…')"


def test_json_log_lines(settings, capsys):
    from logging.config import dictConfig

    config = json.loads(json.dumps(settings.LOGGING))
    config["handlers"]["console"]["formatter"] = "json"
    dictConfig(config)
    try:
        logging.getLogger("memoryapp.test").warning("receipt %s written", "r1")
        line = capsys.readouterr().err.strip().splitlines()[-1]
        data = json.loads(line)
        assert data["message"] == "receipt r1 written" and data["levelname"] == "WARNING"
    finally:
        dictConfig(settings.LOGGING)
