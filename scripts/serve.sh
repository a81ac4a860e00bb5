#!/usr/bin/env bash
# `make serve`: the project as in production — gunicorn, static files by WhiteNoise,
# an erasure worker beside it — with settings from the environment (README, Deploying).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python

export DEBUG="${DEBUG:-false}"
export STATIC_HASHED=true  # pages name the hashed copies collectstatic writes below
export MEMORYAPP_ERASURE_WORKER="${MEMORYAPP_ERASURE_WORKER:-true}"
# One address for gunicorn and for the login URL bootstrap_admin prints.
BIND="${BIND:-127.0.0.1:8000}"
# One directory where every process (gunicorn workers, the erasure worker) keeps its
# metrics, so a scrape of /metrics adds them up; emptied at each start.
export PROMETHEUS_MULTIPROC_DIR="${PROMETHEUS_MULTIPROC_DIR:-var/prometheus}"
rm -rf "$PROMETHEUS_MULTIPROC_DIR" && mkdir -p "$PROMETHEUS_MULTIPROC_DIR"

"$PY" manage.py migrate --noinput
"$PY" manage.py collectstatic --noinput --verbosity 0
# Errors stop the start; the warnings it prints are explained in the README.
"$PY" manage.py check --deploy --fail-level ERROR
"$PY" manage.py bootstrap_admin --bind "$BIND"

"$PY" manage.py memory worker --quiet &
worker=$!
trap 'kill "$worker" 2>/dev/null || true' EXIT INT TERM

workers="${WEB_CONCURRENCY:-$(( 2 * $(nproc) ))}"
.venv/bin/gunicorn project.wsgi:application \
  --config project/gunicorn.conf.py \
  --workers "$workers" \
  --bind "$BIND"
