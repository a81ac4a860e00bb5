#!/usr/bin/env bash
# What the test suite needs from the system, beyond the virtualenv: Debian's chromium
# (the browser tests) and pg_repack for the local PostgreSQL cluster's version (the
# erasure purge tests: the server extension and its client program, one package).
#
# Used by `make test` and by .ci/run. Installs only what is missing, and only as root
# with apt-get; otherwise it prints what to install and carries on (the tests that
# need a missing piece are skipped locally, and fail under CI=true).
set -euo pipefail

missing=()
if [ ! -x /usr/bin/chromium ]; then
  missing+=(chromium)
fi
if [ -d /etc/postgresql ]; then
  # The cluster's major version decides the package (postgresql-15-repack for 15).
  pg_version="$(ls /etc/postgresql | sort -V | tail -n 1)"
  if [ -n "$pg_version" ] && {
    ! command -v pg_repack >/dev/null ||
      [ ! -f "/usr/share/postgresql/$pg_version/extension/pg_repack.control" ]
  }; then
    missing+=("postgresql-$pg_version-repack")
  fi
elif ! command -v pg_repack >/dev/null; then
  echo "system_deps: no local PostgreSQL cluster (/etc/postgresql); for the pg_repack tests" \
    "install postgresql-<version>-repack where the server runs and the pg_repack program here."
fi

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
  echo "system_deps: installing ${missing[*]} (Debian packages) for the tests..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
else
  echo "system_deps: missing for some tests: ${missing[*]}"
  echo "system_deps: install them as root: apt-get install ${missing[*]}"
  echo "system_deps: (until then those tests are skipped here; under CI=true they fail)"
fi
