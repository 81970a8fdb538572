#!/usr/bin/env bash
# A PostgreSQL HA stack on this machine's loopback, as operators run it:
# etcd, two PostgreSQL 15 nodes managed by Patroni (synchronous standby),
# HAProxy routing to whichever node Patroni's REST API calls primary.
#
#   scripts/ha/stack.sh start [sync|async]   install what is missing, start, wait healthy
#   scripts/ha/stack.sh stop                 stop everything by PID, delete the data
#   scripts/ha/stack.sh status               Patroni's view of the cluster
#
# HA_DIR (default /tmp/leasehold-ha) holds data, configuration, logs and PIDs; it must be a folder
# the postgres user can reach. The stack listens on consecutive ports from HA_PORT_BASE (default
# 54330), so two stacks can run on one machine: HAProxy on the base, PostgreSQL on +1 and +2,
# Patroni's REST API on +3 and +4, etcd on +5 (peers +6). A base below the kernel's ephemeral range
# (ip_local_port_range) cannot be taken meanwhile by some program's outgoing connection.
set -euo pipefail

HA_DIR=${HA_DIR:-/tmp/leasehold-ha}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
BASE=${HA_PORT_BASE:-54330}
HAPROXY_PORT=$BASE
NODE_PORTS=($((BASE + 1)) $((BASE + 2)))
REST_PORTS=($((BASE + 3)) $((BASE + 4)))
ETCD_PORT=$((BASE + 5))
ETCD_PEER_PORT=$((BASE + 6))
SCOPE=leasehold-ha-$BASE

log() { echo "[ha] $*" >&2; }

install_missing() {
  local missing=()
  command -v patroni >/dev/null || missing+=(patroni)
  command -v etcd >/dev/null || missing+=(etcd-server)
  command -v haproxy >/dev/null || missing+=(haproxy)
  [ -x "$PG_BIN/postgres" ] || missing+=(postgresql-15)
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null ||
      { apt-get update -q && apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; }
  fi
}

# Runs a daemon in the background as the given user, its PID in $HA_DIR/<name>.pid. From HA_DIR:
# a daemon started as postgres from a folder postgres cannot enter (a private clone) dies at once.
spawn() {
  local name=$1 user=$2
  shift 2
  if [ "$user" = root ]; then
    (cd "$HA_DIR" && exec nohup "$@" >"$HA_DIR/$name.log" 2>&1) &
  else
    (cd "$HA_DIR" && exec nohup runuser -u "$user" -- "$@" >"$HA_DIR/$name.log" 2>&1) &
  fi
  echo $! >"$HA_DIR/$name.pid"
}

# The first error of each log, then its end: the cause is rarely in the last lines.
explain_failure() {
  local file
  for file in "$HA_DIR"/*.log; do
    [ -e "$file" ] || continue
    echo "--- $(basename "$file"): first error" >&2
    grep -m 1 -n -iE 'error|fatal|exception|traceback|denied' "$file" >&2 || echo "(none)" >&2
    echo "--- $(basename "$file"): last lines" >&2
    tail -n 15 "$file" >&2
  done
}

wait_until() {
  local what=$1 seconds=$2
  shift 2
  for _ in $(seq 1 $((seconds * 4))); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.25
  done
  log "timed out waiting for $what"
  status >&2 || true
  explain_failure
  return 1
}

write_patroni_config() {
  local index=$1 mode=$2
  local name="node$((index + 1))" port=${NODE_PORTS[$index]} rest=${REST_PORTS[$index]}
  local synchronous=true
  [ "$mode" = async ] && synchronous=false
  cat >"$HA_DIR/$name.yml" <<YAML
scope: $SCOPE
name: $name
restapi:
  listen: 127.0.0.1:$rest
  connect_address: 127.0.0.1:$rest
etcd3:
  hosts: 127.0.0.1:$ETCD_PORT
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 4
    # A standby further behind than this is not promoted: with asynchronous replication, the most a failover may lose.
    maximum_lag_on_failover: 16777216
    # A primary that crashed is failed over at once rather than restarted in place.
    master_start_timeout: 0
    synchronous_mode: $synchronous
    synchronous_mode_strict: false
    postgresql:
      use_pg_rewind: true
      parameters:
        wal_level: replica
        hot_standby: 'on'
        max_wal_senders: 10
        max_replication_slots: 10
        wal_log_hints: 'on'
        max_connections: 200
        synchronous_commit: 'on'
  initdb:
    - encoding: UTF8
    - data-checksums
postgresql:
  listen: 127.0.0.1:$port
  connect_address: 127.0.0.1:$port
  data_dir: $HA_DIR/$name
  bin_dir: $PG_BIN
  pgpass: $HA_DIR/$name.pgpass
  authentication:
    superuser:
      username: postgres
      password: leasehold-ha
    replication:
      username: replicator
      password: leasehold-ha
    rewind:
      username: postgres
      password: leasehold-ha
  parameters:
    unix_socket_directories: '$HA_DIR'
  pg_hba:
    - local all all trust
    - host replication replicator 127.0.0.1/32 trust
    - host all all 127.0.0.1/32 trust
YAML
}

write_haproxy_config() {
  cat >"$HA_DIR/haproxy.cfg" <<CFG
global
  maxconn 1000
defaults
  mode tcp
  retries 2
  timeout connect 2s
  timeout client 30m
  timeout server 30m
  timeout check 1s
listen primary
  bind 127.0.0.1:$HAPROXY_PORT
  option httpchk OPTIONS /primary
  http-check expect status 200
  default-server inter 500ms fastinter 250ms fall 2 rise 2 on-marked-down shutdown-sessions
  server node1 127.0.0.1:${NODE_PORTS[0]} maxconn 500 check port ${REST_PORTS[0]}
  server node2 127.0.0.1:${NODE_PORTS[1]} maxconn 500 check port ${REST_PORTS[1]}
CFG
}

primary_answers() {
  "$PG_BIN/../bin/psql" -h 127.0.0.1 -p "$HAPROXY_PORT" -U postgres -d postgres -tAc \
    "SELECT NOT pg_is_in_recovery()" 2>/dev/null | grep -q t
}

# $1: the roles that count, comma-separated.
replica_streaming() {
  curl -sf "http://127.0.0.1:${REST_PORTS[0]}/cluster" | python3 -c '
import json, sys
roles = sys.argv[1].split(",")
members = json.load(sys.stdin)["members"]
sys.exit(0 if any(m["role"] in roles and m["state"] in ("running", "streaming") for m in members) else 1)' "$1"
}

start() {
  local mode=${1:-sync}
  install_missing
  if [ -e "$HA_DIR/etcd.pid" ]; then
    log "already started in $HA_DIR; stop it first"
    exit 1
  fi
  mkdir -p "$HA_DIR"
  chown postgres: "$HA_DIR"
  chmod 700 "$HA_DIR"
  spawn etcd root etcd --name ha --data-dir "$HA_DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "ha=http://127.0.0.1:$ETCD_PEER_PORT"
  wait_until "etcd" 30 curl -sf "http://127.0.0.1:$ETCD_PORT/health"
  for index in 0 1; do
    write_patroni_config "$index" "$mode"
    chown postgres: "$HA_DIR/node$((index + 1)).yml"
  done
  spawn node1 postgres patroni "$HA_DIR/node1.yml"
  wait_until "node1 to lead" 60 curl -sf "http://127.0.0.1:${REST_PORTS[0]}/primary"
  spawn node2 postgres patroni "$HA_DIR/node2.yml"
  write_haproxy_config
  spawn haproxy root haproxy -f "$HA_DIR/haproxy.cfg" -db
  # HAProxy routes only once Patroni's REST API has answered its checks twice, which on a
  # loaded machine can lag well behind node1 taking the lead while node2 copies its base backup.
  wait_until "the primary through HAProxy" 90 primary_answers
  # With synchronous_mode Patroni promotes only the standby it has marked synchronous: until then, a
  # primary that dies is not failed over.
  if [ "$mode" = sync ]; then
    wait_until "node2 to stream as the synchronous standby" 90 replica_streaming sync_standby
  else
    wait_until "node2 to stream" 90 replica_streaming replica,sync_standby
  fi
  log "up ($mode): postgres://postgres@127.0.0.1:$HAPROXY_PORT/postgres"
}

stop() {
  for name in haproxy node2 node1 etcd; do
    local file="$HA_DIR/$name.pid"
    [ -e "$file" ] || continue
    local pid
    pid=$(cat "$file")
    # Patroni stops its PostgreSQL on SIGTERM; a postmaster it left behind is killed below.
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$file"
  done
  for data in "$HA_DIR"/node1 "$HA_DIR"/node2; do
    if [ -f "$data/postmaster.pid" ]; then
      kill -9 "$(head -n 1 "$data/postmaster.pid")" 2>/dev/null || true
    fi
  done
  # The logs outlive the stack, for whoever asks why a run failed.
  mkdir -p "$HA_DIR.logs"
  cp "$HA_DIR"/*.log "$HA_DIR.logs/" 2>/dev/null || true
  rm -rf "$HA_DIR"
  log "stopped (logs in $HA_DIR.logs)"
}

status() {
  curl -sf "http://127.0.0.1:${REST_PORTS[0]}/cluster" || curl -sf "http://127.0.0.1:${REST_PORTS[1]}/cluster"
  echo
}

case "${1:-}" in
  start) start "${2:-sync}" ;;
  stop) stop ;;
  status) status ;;
  *)
    echo "usage: $0 start [sync|async] | stop | status" >&2
    exit 2
    ;;
esac
