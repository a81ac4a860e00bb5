# Two commands set everything up on a fresh clone: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TEST_POSTGRES_URL ?= postgres://postgres@127.0.0.1:5432/memoryapp
PYTEST_ARGS ?=
# pytest-xdist workers per pass (`make test PYTEST_WORKERS=0` runs in one process). The
# tests that need the PostgreSQL cluster to themselves share one xdist_group (tests/conftest.py),
# which --dist loadgroup keeps on one worker, one after the other.
PYTEST_WORKERS ?= auto
PYTEST_XDIST = -n $(PYTEST_WORKERS) --dist loadgroup
# The PostgreSQL pass runs in two parts. A purge waits for every older transaction in the
# cluster, and a test in another worker holds one for as long as it runs (pytest-django
# wraps each test in a transaction): so the tests that purge (the `pg_cluster` marker,
# PG_CLUSTER_MODULES in tests/conftest.py) run alone in one process, after the rest ran on
# PYTEST_PG_WORKERS workers (`make test PYTEST_PG_WORKERS=0` runs those in one process too).
# A `-m` in PYTEST_ARGS replaces the two parts' selection: use `-k` to narrow a run.
PYTEST_PG_WORKERS ?= 2
PYTEST_PG_XDIST = -n $(PYTEST_PG_WORKERS) --dist loadgroup
# Where `make run` serves (`make run RUN_ADDR=127.0.0.1:8011`); the printed login URL follows.
RUN_ADDR ?= 127.0.0.1:8000

.PHONY: run serve demo shell manage test test-sqlite test-postgres lint typecheck install system-deps bench bench-api bench-linear bench-tenants bench-erasure bench-escalation bench-retrieval bench-replicas clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

## The server with admin and API on the embedded SQLite default (var/db.sqlite3), and
## an erasure worker beside it (HTTP/admin erasures answer once rows are deleted).
run: $(STAMP)
	DEBUG=$${DEBUG:-true} $(PY) manage.py migrate --noinput
	DEBUG=$${DEBUG:-true} $(PY) manage.py bootstrap_admin --bind $(RUN_ADDR)
	$(PY) manage.py memory worker --quiet & worker=$$!; \
	trap 'kill $$worker 2>/dev/null' EXIT INT TERM; \
	DEBUG=$${DEBUG:-true} MEMORYAPP_ERASURE_WORKER=$${MEMORYAPP_ERASURE_WORKER:-true} \
		$(PY) manage.py runserver $(RUN_ADDR)

## A few demo tenants (memories, session summaries, review items) in the `make run` database,
## to try the admin, the API and recall at once; refuses a database holding other data.
demo: $(STAMP)
	DEBUG=$${DEBUG:-true} $(PY) manage.py migrate --noinput
	DEBUG=$${DEBUG:-true} $(PY) manage.py memory demo

## A Django shell (or any manage.py command) in the project's virtualenv (.venv), e.g.
## `make manage ARGS="memory list --project acme/web"`; the same as `.venv/bin/python manage.py …`.
ARGS ?=
shell: $(STAMP)
	$(PY) manage.py shell

manage: $(STAMP)
	$(PY) manage.py $(ARGS)

## As in production: gunicorn (WEB_CONCURRENCY workers, default 2 x cores) + WhiteNoise,
## DEBUG off, an erasure worker beside it; settings from the environment (README, Deploying).
serve: $(STAMP)
	scripts/serve.sh

## System packages the tests need (chromium, pg_repack), then lint and typecheck, then
## the whole suite on SQLite and again on PostgreSQL.
test: $(STAMP) system-deps lint typecheck test-sqlite test-postgres

## chromium and pg_repack for the cluster's version: installed when missing (as root,
## apt-get), else what to install is printed (scripts/system_deps.sh; .ci/run too).
system-deps:
	scripts/system_deps.sh

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) manage.py makemigrations --check --dry-run

## mypy with the Django and DRF plugins over memoryapp/ and project/ ([tool.mypy] in
## pyproject.toml); 0 errors. Its cache lives in .mypy_cache/ (a warm run takes seconds).
typecheck: $(STAMP)
	$(VENV)/bin/mypy

## Each pass prints how long it took; exit status 5 (no test selected by PYTEST_ARGS) is success.
test-sqlite: $(STAMP)
	@echo "=== test suite on SQLite ==="
	start=$$(date +%s); \
	env -u DATABASE_URL $(PY) -m pytest $(PYTEST_XDIST) $(PYTEST_ARGS); rc=$$?; \
	echo "=== SQLite pass took $$(( $$(date +%s) - start )) s ==="; \
	[ $$rc -eq 5 ] && rc=0; exit $$rc

test-postgres: $(STAMP)
	@if $(PY) scripts/pg_ready.py "$(TEST_POSTGRES_URL)"; then \
		echo "=== test suite on PostgreSQL ($(TEST_POSTGRES_URL)) ==="; \
		start=$$(date +%s); \
		DATABASE_URL="$(TEST_POSTGRES_URL)" $(PY) -m pytest $(PYTEST_PG_XDIST) -m "not pg_cluster" $(PYTEST_ARGS); rc=$$?; \
		[ $$rc -eq 5 ] && rc=0; \
		echo "=== PostgreSQL pass, the tests that purge, alone ==="; \
		DATABASE_URL="$(TEST_POSTGRES_URL)" $(PY) -m pytest -n 0 -m pg_cluster $(PYTEST_ARGS); rc2=$$?; \
		[ $$rc2 -eq 5 ] && rc2=0; \
		echo "=== PostgreSQL pass took $$(( $$(date +%s) - start )) s ==="; \
		[ $$rc -eq 0 ] && exit $$rc2; exit $$rc; \
	elif [ "$$CI" = "true" ]; then \
		echo "!!! PostgreSQL is unreachable at $(TEST_POSTGRES_URL): failing (CI=true)."; exit 1; \
	else \
		echo ""; \
		echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"; \
		echo "!!! PostgreSQL is unreachable at $(TEST_POSTGRES_URL)"; \
		echo "!!! SKIPPING the PostgreSQL pass. Set TEST_POSTGRES_URL or start PostgreSQL."; \
		echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"; \
	fi

## Recall benchmark against Agentao; BENCH_ARGS="--quick" for a smoke run.
BENCH_ARGS ?=
bench: $(STAMP)
	$(PY) bench/recall.py $(BENCH_ARGS)

## HTTP API load: gunicorn (2 workers) on PostgreSQL, 100 namespaces x 10,000 memories.
## BENCH_API_ARGS="--quick" for a smoke run (see bench/api_load.py --help).
BENCH_API_ARGS ?=
bench-api: $(STAMP)
	$(PY) bench/api_load.py $(BENCH_API_ARGS)

## Text scans against input size (path hints, tokens, keywords, secrets): bench/LINEAR.md.
bench-linear: $(STAMP)
	$(PY) bench/linear_scan.py $(BENCH_ARGS)

## Cold-process recall over 1,000 namespaces x 1,000 memories (+ one of 100,000), SQLite and
## PostgreSQL, recall snapshots off / on / pre-built, Agentao for one tenant: bench/TENANTS.md.
## BENCH_ARGS="--quick" for a smoke run; "--vendor sqlite --tenants 200" etc. (--help).
bench-tenants: $(STAMP)
	$(PY) bench/tenants.py $(BENCH_ARGS)

## Erasure while other tenants work: SQLite 1,000,000 and PostgreSQL 10,000,000 memories,
## before and after: SQLite VACUUM / incremental_vacuum, PostgreSQL whole tables / 64 partitions
## (pg_repack both): bench/ERASURE.md.
## BENCH_ARGS="--quick" for a smoke run; "--vendor postgresql --pg-namespaces 1000" etc. (--help).
bench-erasure: $(STAMP)
	$(PY) bench/erasure.py $(BENCH_ARGS)

## What each stronger purge costs when a verification finds erased bytes (SQLite, 100,000
## and 1,000,000 memories) and how often each is needed: bench/ESCALATION.md.
## BENCH_ARGS="--quick" for a smoke run (--help).
bench-escalation: $(STAMP)
	$(PY) bench/escalation.py $(BENCH_ARGS)

## Retrieval quality (found@5/@10 per keying and category: agentao, hybrid, plain BM25) on a
## conversational QA set, and warm recall latency at 1,000 and 100,000 memories:
## bench/RETRIEVAL.md. BENCH_ARGS="--quick" for a smoke run; "--data locomo.json" (--help).
bench-retrieval: $(STAMP)
	$(PY) bench/retrieval.py $(BENCH_ARGS)

## Recall p50/p99 from a streaming replica vs from the primary in one run, and the primary's
## load while 4 workers recall from the replica (a hot standby made by scripts/pg_standby.sh,
## dropped after): bench/REPLICAS.md. BENCH_ARGS="--quick" for a smoke run (--help).
bench-replicas: $(STAMP)
	$(PY) bench/replicas.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) var/test_db.sqlite3*
