"""The ``memories_change`` counter: its rows and the triggers that advance it, per vendor.

The SQL is frozen here on purpose (docs/design.md): what a migration installed must
not change when the app's code changes. Trigger names are Agentao's, so an
Agentao process opening the same SQLite file finds them and creates no others.
"""

from django.db import migrations

from memoryapp.db.operations import VendorSQL

_SEED_ROWS = [
    "INSERT INTO schema_meta(key, value) VALUES ('memories_change', '0') ON CONFLICT (key) DO NOTHING",
    "INSERT INTO schema_meta(key, value) VALUES ('version', '3') ON CONFLICT (key) DO NOTHING",
]

# SQLite triggers are row-level. The upsert (not a plain UPDATE) means the
# counter survives a flush of schema_meta: the next write re-creates it.
_SQLITE_TRIGGER = """
CREATE TRIGGER trg_memories_change_{name} AFTER {event} ON memories
BEGIN
    INSERT INTO schema_meta(key, value) VALUES ('memories_change', '1')
    ON CONFLICT(key) DO UPDATE SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT);
END
"""

_PG_FUNCTION = """
CREATE OR REPLACE FUNCTION memoryapp_bump_memories_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO schema_meta(key, value) VALUES ('memories_change', '1')
    ON CONFLICT (key) DO UPDATE SET value = (CAST(schema_meta.value AS bigint) + 1)::text;
    RETURN NULL;
END;
$$
"""

# Statement-level on PostgreSQL: one bump per statement keeps a bulk import
# from updating the counter row once per memory; TRUNCATE is covered too.
_PG_TRIGGER = (
    "CREATE TRIGGER trg_memories_change_{name} AFTER {event} ON memories "
    "FOR EACH STATEMENT EXECUTE FUNCTION memoryapp_bump_memories_change()"
)

_EVENTS = [("ins", "INSERT"), ("upd", "UPDATE"), ("del", "DELETE")]

FORWARDS = {
    "sqlite": [
        *_SEED_ROWS,
        *(f"DROP TRIGGER IF EXISTS trg_memories_change_{n}" for n, _ in _EVENTS),
        *(_SQLITE_TRIGGER.format(name=n, event=e).strip() for n, e in _EVENTS),
    ],
    "postgresql": [
        *_SEED_ROWS,
        _PG_FUNCTION.strip(),
        *(_PG_TRIGGER.format(name=n, event=e) for n, e in [*_EVENTS, ("trunc", "TRUNCATE")]),
    ],
}

BACKWARDS = {
    "sqlite": [f"DROP TRIGGER IF EXISTS trg_memories_change_{n}" for n, _ in _EVENTS],
    "postgresql": [
        *(
            f"DROP TRIGGER IF EXISTS trg_memories_change_{n} ON memories"
            for n in ("ins", "upd", "del", "trunc")
        ),
        "DROP FUNCTION IF EXISTS memoryapp_bump_memories_change()",
    ],
}


class Migration(migrations.Migration):
    dependencies = [("memoryapp", "0001_initial")]

    operations = [
        VendorSQL(
            forwards=FORWARDS,
            backwards=BACKWARDS,
            description="Create the memories_change counter rows and triggers",
        ),
    ]
