#!/usr/bin/env bash
# A hot standby of the local PostgreSQL cluster, for the replica tests and the replica
# benchmark: a second cluster of the same major version on another port, cloned with
# pg_basebackup -R and streaming from the primary (127.0.0.1:5432, user postgres, trust).
#
#   scripts/pg_standby.sh start PORT   (re)create cluster <version>/standby_PORT, streaming
#   scripts/pg_standby.sh stop PORT    stop and drop it (nothing to do when absent)
#   scripts/pg_standby.sh prune        drop the standby_* clusters whose owner process is
#                                      gone (a test run killed before its teardown)
#
# PG_STANDBY_OWNER=<pid> with `start` records which process owns the standby, for `prune`.
# PRIMARY_HOST / PRIMARY_PORT / PRIMARY_USER name another primary (default 127.0.0.1:5432,
# postgres). Needs root (or the postgres user) and Debian's postgresql-common tools.
# Every step says what it did; any failure stops the script with a non-zero status.
set -euo pipefail

PRIMARY_HOST="${PRIMARY_HOST:-127.0.0.1}"
PRIMARY_PORT="${PRIMARY_PORT:-5432}"
PRIMARY_USER="${PRIMARY_USER:-postgres}"
WAIT_SECONDS="${PG_STANDBY_WAIT:-300}"

say() { echo "pg_standby: $*"; }
die() {
  echo "pg_standby: ERROR: $*" >&2
  exit 1
}

primary_sql() {
  psql -X -q -h "$PRIMARY_HOST" -p "$PRIMARY_PORT" -U "$PRIMARY_USER" -d postgres -Atc "$1"
}

standby_sql() {
  psql -X -q -h 127.0.0.1 -p "$1" -U "$PRIMARY_USER" -d postgres -Atc "$2" 2>/dev/null
}

# Run a command as the postgres system user (the owner of every cluster's files).
as_postgres() {
  if [ "$(id -un)" = postgres ]; then
    "$@"
  else
    runuser -u postgres -- "$@"
  fi
}

need_tools() {
  for tool in pg_createcluster pg_dropcluster pg_ctlcluster pg_lsclusters pg_basebackup psql; do
    command -v "$tool" >/dev/null || die "$tool is missing (Debian's postgresql-common / postgresql-client)"
  done
}

check_port() {
  [[ "${1:-}" =~ ^[0-9]+$ ]] || die "PORT must be a number, got '${1:-}'"
  [ "$1" != "$PRIMARY_PORT" ] || die "PORT $1 is the primary's port"
}

primary_version() {
  local num
  num="$(primary_sql 'SHOW server_version_num')" ||
    die "the primary at $PRIMARY_HOST:$PRIMARY_PORT does not answer"
  echo $((num / 10000))
}

cluster_exists() { [ -f "/etc/postgresql/$1/$2/postgresql.conf" ]; }

# The primary must accept a replication connection from 127.0.0.1 without a password
# and have WAL senders: add what is missing to pg_hba.conf and reload (no restart).
prepare_primary() {
  local level senders hba
  level="$(primary_sql 'SHOW wal_level')"
  [ "$level" != minimal ] || die "the primary runs wal_level=minimal; set replica and restart it"
  senders="$(primary_sql 'SHOW max_wal_senders')"
  [ "$senders" -ge 1 ] || die "the primary has max_wal_senders=0; raise it and restart it"
  hba="$(primary_sql 'SHOW hba_file')"
  [ -w "$hba" ] || die "cannot edit the primary's $hba (run as root or postgres)"
  if grep -Eq '^[[:space:]]*host[[:space:]]+replication[[:space:]]+all[[:space:]]+127\.0\.0\.1/32[[:space:]]+trust' "$hba"; then
    say "primary: $hba already allows replication from 127.0.0.1"
  else
    printf '%s\n' "# Added by memoryapp's scripts/pg_standby.sh: a local hot standby streams from here." \
      "host replication all 127.0.0.1/32 trust" >>"$hba"
    primary_sql 'SELECT pg_reload_conf()' >/dev/null
    say "primary: added 'host replication all 127.0.0.1/32 trust' to $hba and reloaded"
  fi
}

drop_cluster() {
  local version="$1" name="$2"
  if cluster_exists "$version" "$name"; then
    pg_dropcluster --stop "$version" "$name"
    say "dropped cluster $version/$name"
  fi
  # pg_dropcluster leaves the directory when it holds our owner_pid file.
  rm -rf "/etc/postgresql/$version/$name"
  drop_slot "memoryapp_$name"
}

# The standby's replication slot on the primary keeps the WAL it has not received yet
# (without it, a busy primary recycled segments between the base backup and the start, and
# the standby could never catch up); a slot left behind would keep WAL forever.
drop_slot() {
  if [ "$(primary_sql "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$1'")" != 0 ]; then
    primary_sql "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '$1' AND active_pid IS NOT NULL" >/dev/null
    sleep 0.5
    primary_sql "SELECT pg_drop_replication_slot('$1')" >/dev/null
    say "dropped replication slot $1 on the primary"
  fi
}

# Settings a hot standby must hold at least as high as its primary's, or it refuses to start.
standby_options() {
  local name value
  for name in max_connections max_worker_processes max_wal_senders max_prepared_transactions \
    max_locks_per_transaction; do
    value="$(primary_sql "SHOW $name")"
    printf -- '-o\n%s=%s\n' "$name" "$value"
  done
}

wait_streaming() {
  local port="$1" recovery status
  for _ in $(seq 1 "$WAIT_SECONDS"); do
    recovery="$(standby_sql "$port" 'SELECT pg_is_in_recovery()' || true)"
    status="$(standby_sql "$port" 'SELECT status FROM pg_stat_wal_receiver' || true)"
    if [ "$recovery" = t ] && [ "$status" = streaming ]; then
      return 0
    fi
    sleep 1
  done
  die "the standby on port $port is not streaming after ${WAIT_SECONDS}s (in recovery: '${recovery:-?}', receiver: '${status:-none}'); see /var/log/postgresql/"
}

start() {
  local port="$1" version name datadir
  version="$(primary_version)"
  name="standby_$port"
  datadir="/var/lib/postgresql/$version/$name"
  prepare_primary
  if cluster_exists "$version" "$name"; then
    say "a cluster $version/$name already exists (left by an earlier run): recreating it"
  fi
  drop_cluster "$version" "$name"
  if (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    die "port $port is taken by another program"
  fi
  mapfile -t options < <(standby_options)
  pg_createcluster --start-conf=manual -p "$port" "${options[@]}" \
    -o shared_buffers=32MB "$version" "$name" >/dev/null
  # Loopback only, like the primary (later lines of postgresql.conf win). A throw-away
  # standby for tests and benchmarks: no fsync (on a loaded machine, syncing the copied
  # data directory at start-up alone took longer than pg_ctl's wait).
  printf '%s\n' "listen_addresses = '127.0.0.1'" "fsync = off" \
    >>"/etc/postgresql/$version/$name/postgresql.conf"
  say "created cluster $version/$name on port $port"
  # The standby answers like the primary: the same client authentication.
  cp "$(primary_sql 'SHOW hba_file')" "/etc/postgresql/$version/$name/pg_hba.conf"
  if [ -n "${PG_STANDBY_OWNER:-}" ]; then
    echo "$PG_STANDBY_OWNER" >"/etc/postgresql/$version/$name/owner_pid"
  fi
  find "$datadir" -mindepth 1 -delete
  # A replication slot (-C -S): on a busy primary (checkpoints forced by erasures) the WAL
  # the standby still needs is otherwise recycled before it asks ("already been removed").
  as_postgres pg_basebackup -h "$PRIMARY_HOST" -p "$PRIMARY_PORT" -U "$PRIMARY_USER" \
    -D "$datadir" -R -X stream -c fast --no-sync -C -S "memoryapp_$name"
  say "copied the primary into $datadir (pg_basebackup -R -X stream, slot memoryapp_$name)"
  pg_ctlcluster --skip-systemctl-redirect "$version" "$name" start -- -t "$WAIT_SECONDS"
  say "started $version/$name"
  wait_streaming "$port"
  say "standby on 127.0.0.1:$port is in recovery and streaming from $PRIMARY_HOST:$PRIMARY_PORT"
}

stop() {
  local port="$1" version
  version="$(primary_version)"
  if cluster_exists "$version" "standby_$port"; then
    drop_cluster "$version" "standby_$port"
  else
    say "no cluster $version/standby_$port: nothing to stop"
  fi
}

prune() {
  local dir name owner slot
  # Slots of standbys whose cluster is gone (this script's, by their name).
  for slot in $(primary_sql "SELECT slot_name FROM pg_replication_slots WHERE slot_name LIKE 'memoryapp_standby_%' AND NOT active"); do
    if ! ls -d /etc/postgresql/*/"${slot#memoryapp_}" >/dev/null 2>&1; then
      drop_slot "$slot"
    fi
  done
  for dir in /etc/postgresql/*/standby_*; do
    [ -d "$dir" ] || continue
    name="$(basename "$dir")"
    if [ ! -f "$dir/postgresql.conf" ]; then
      rm -rf "$dir" # what a dropped cluster left behind (its owner_pid file)
      continue
    fi
    owner="$(cat "$dir/owner_pid" 2>/dev/null || true)"
    if [ -z "$owner" ]; then
      say "keeping $(basename "$(dirname "$dir")")/$name: no owner recorded (started by hand)"
    elif kill -0 "$owner" 2>/dev/null; then
      say "keeping $(basename "$(dirname "$dir")")/$name: its owner $owner is running"
    else
      drop_cluster "$(basename "$(dirname "$dir")")" "$name"
      say "(its owner $owner was gone)"
    fi
  done
}

need_tools
case "${1:-}" in
  start)
    check_port "${2:-}"
    start "$2"
    ;;
  stop)
    check_port "${2:-}"
    stop "$2"
    ;;
  prune) prune ;;
  *) die "usage: $0 start PORT | stop PORT | prune" ;;
esac
