#!/usr/bin/env bash
# Local test servers for grid-sql: PostgreSQL 15 + MariaDB, localhost only.
#
#   scripts/services.sh start   install (apt, only if missing), initialise, start, load test data
#   scripts/services.sh stop    stop both servers (data is kept)
#   scripts/services.sh env     print `export GRID_SQL_PG_URL=...` / `export GRID_SQL_MYSQL_URL=...`
#   scripts/services.sh status  say what is running
#
# Why this shape: the db tests need real servers with real grants (the policy layer reads
# privileges from the catalog, and the cross-check runs probe statements), but nothing here may
# touch a system cluster. So both servers run from their own data dir outside the repo, on fixed
# non-standard ports, bound to 127.0.0.1. Re-runs are cheap: every step checks before acting, and
# each data set is loaded once, recorded in a marker table (grid_sql_meta.loaded) in each server.
#
# Environment (all optional):
#   GRID_SQL_SERVICES_DIR  state dir            (default /var/tmp/grid-sql-services)
#   GRID_SQL_PG_PORT       PostgreSQL TCP port  (default 55432)
#   GRID_SQL_MYSQL_PORT    MariaDB TCP port     (default 53306)
#   GRID_SQL_SHARED        shared data root     (default <repo>/../shared)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
STATE=${GRID_SQL_SERVICES_DIR:-/var/tmp/grid-sql-services}
PG_PORT=${GRID_SQL_PG_PORT:-55432}
MY_PORT=${GRID_SQL_MYSQL_PORT:-53306}
SHARED=${GRID_SQL_SHARED:-$repo/../shared}
DATA=$SHARED/data
PG_BIN=/usr/lib/postgresql/15/bin
PG_DIR=$STATE/pg
PG_RUN=$STATE/pg-run
MY_DIR=$STATE/mariadb
MY_RUN=$STATE/mariadb-run
MY_SOCK=$MY_RUN/mariadb.sock
# Fixed credentials of the superusers used for test setup. These servers listen on 127.0.0.1
# only and hold public sample data; the password exists so that TCP auth is exercised as in
# production (scram-sha-256 / mysql_native_password), not to protect anything.
PG_SUPER=postgres
PG_PASS=grid-sql
MY_SUPER=grid_admin
MY_PASS=grid-sql
# Bump to force a reload of every data set (e.g. after the shared data changes).
DATA_VERSION=1

log() { printf '[services] %s\n' "$*" >&2; }
die() { printf '[services] error: %s\n' "$*" >&2; exit 1; }
is_root() { [ "$(id -u)" -eq 0 ]; }

# Run a command as the OS user that owns the PostgreSQL cluster: postgres refuses to run as root.
as_pg() { if is_root; then runuser -u postgres -- "$@"; else "$@"; fi; }

psql_super() { PGOPTIONS="-c client_min_messages=warning" as_pg "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$PG_RUN" -p "$PG_PORT" -U "$PG_SUPER" "$@"; }
my_super() { mariadb --protocol=socket --socket="$MY_SOCK" -u root "$@"; }

apt_updated=0
apt_install() {
    is_root || die "missing packages ($*) and not root: install them with apt-get"
    if [ "$apt_updated" -eq 0 ]; then
        log "apt-get update"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        apt_updated=1
    fi
    log "apt-get install $*"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

install_missing() {
    if [ ! -x "$PG_BIN/postgres" ] || [ ! -x "$PG_BIN/psql" ]; then
        # Debian's postgresql-common would create and start a "main" cluster on 5432; we do not
        # want a system cluster, only the binaries.
        mkdir -p /etc/postgresql-common/createcluster.d
        echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.d/grid-sql.conf
        apt_install postgresql-15 postgresql-client-15
    fi
    if ! command -v mariadbd >/dev/null 2>&1 && [ ! -x /usr/sbin/mariadbd ]; then
        apt_install mariadb-server mariadb-client
    fi
    command -v mariadb >/dev/null 2>&1 || apt_install mariadb-client
}

# ---------------------------------------------------------------- PostgreSQL
pg_running() { as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR" status >/dev/null 2>&1; }

pg_start() {
    mkdir -p "$STATE"
    chmod 755 "$STATE"
    if [ ! -s "$PG_DIR/PG_VERSION" ]; then
        log "initdb $PG_DIR"
        rm -rf "$PG_DIR"
        mkdir -p "$PG_DIR" "$PG_RUN"
        if is_root; then chown postgres:postgres "$PG_DIR" "$PG_RUN"; fi
        chmod 700 "$PG_DIR" "$PG_RUN"
        local pw
        pw=$(mktemp)
        printf '%s\n' "$PG_PASS" >"$pw"
        if is_root; then chown postgres "$pw"; fi
        # Socket: trust, but the socket dir is 0700 so only the cluster's OS user reaches it.
        # TCP: password (scram), which is how every test role connects.
        as_pg "$PG_BIN/initdb" -D "$PG_DIR" -U "$PG_SUPER" --pwfile="$pw" -E UTF8 --locale=C.UTF-8 \
            --auth-local=trust --auth-host=scram-sha-256 >/dev/null
        rm -f "$pw"
        cat >>"$PG_DIR/postgresql.conf" <<EOF
# grid-sql test server
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$PG_RUN'
unix_socket_permissions = 0700
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 100
EOF
    fi
    mkdir -p "$PG_RUN"
    if is_root; then chown postgres:postgres "$PG_RUN"; fi
    if pg_running; then
        log "PostgreSQL already running on 127.0.0.1:$PG_PORT"
    else
        log "starting PostgreSQL on 127.0.0.1:$PG_PORT"
        as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR" -l "$PG_DIR/server.log" -w -t 60 start >/dev/null \
            || { tail -20 "$PG_DIR/server.log" >&2; die "PostgreSQL did not start"; }
    fi
}

# Names already loaded, read once per run (one query instead of one per data set).
PG_LOADED=""
pg_loaded() { case " $PG_LOADED " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
pg_mark() {
    psql_super -d postgres -c "INSERT INTO grid_sql_meta.loaded VALUES ('$1', $DATA_VERSION)
        ON CONFLICT (name) DO UPDATE SET version = EXCLUDED.version"
}
# pg_load NAME DB FILE...: (re)create DB and run the files into it, unless already loaded.
pg_load() {
    local name=$1 db=$2
    shift 2
    pg_loaded "$name" && return 0
    log "PostgreSQL: loading $name into $db"
    psql_super -d postgres -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)"
    psql_super -d postgres -c "CREATE DATABASE \"$db\""
    local f
    for f in "$@"; do psql_super -d "$db" -f "$f" >/dev/null; done
    pg_mark "$name"
}

pg_load_all() {
    psql_super -d postgres -c "CREATE SCHEMA IF NOT EXISTS grid_sql_meta;
        CREATE TABLE IF NOT EXISTS grid_sql_meta.loaded (name text PRIMARY KEY, version int)" \
        2>/dev/null
    PG_LOADED=$(psql_super -d postgres -tAc \
        "SELECT string_agg(name, ' ') FROM grid_sql_meta.loaded WHERE version = $DATA_VERSION")
    # Chinook's script drops/creates database chinook itself and \c's into it.
    if ! pg_loaded chinook; then
        log "PostgreSQL: loading chinook"
        psql_super -d postgres -c "DROP DATABASE IF EXISTS chinook WITH (FORCE)"
        psql_super -d postgres -f "$DATA/chinook/Chinook_PostgreSql.sql" >/dev/null
        pg_mark chinook
    fi
    pg_load sakila sakila "$DATA/sakila/postgresql/postgres-sakila-schema.sql" \
        "$DATA/sakila/postgresql/postgres-sakila-insert-data-using-copy.sql"
    local f db
    for f in "$DATA"/spider/postgresql/*.sql; do
        db=$(basename "$f" .sql)
        db=${db,,}
        pg_load "spider_$db" "spider_$db" "$f"
    done
    for f in "$DATA"/defog_sql_eval/databases/*/*.sql; do
        db=$(basename "$f" .sql)
        pg_load "defog_$db" "defog_$db" "$f"
    done
}

pg_stop() {
    if [ -s "$PG_DIR/PG_VERSION" ] && pg_running; then
        log "stopping PostgreSQL"
        as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR" -m fast -w stop >/dev/null
    fi
}

# ---------------------------------------------------------------- MariaDB
my_running() { mariadb-admin --protocol=socket --socket="$MY_SOCK" -u root ping >/dev/null 2>&1; }

my_start() {
    mkdir -p "$STATE" "$MY_RUN"
    chmod 755 "$STATE"
    local user_opt=()
    if is_root; then
        user_opt=(--user=mysql)
        chown mysql:mysql "$MY_RUN"
    fi
    if [ ! -d "$MY_DIR/mysql" ]; then
        log "mariadb-install-db $MY_DIR"
        rm -rf "$MY_DIR"
        mkdir -p "$MY_DIR"
        if is_root; then chown mysql:mysql "$MY_DIR"; fi
        # root@localhost without password, reachable only through our private socket.
        mariadb-install-db "${user_opt[@]}" --datadir="$MY_DIR" --skip-test-db \
            --auth-root-authentication-method=normal >/dev/null
    fi
    if my_running; then
        log "MariaDB already running on 127.0.0.1:$MY_PORT"
        return 0
    fi
    log "starting MariaDB on 127.0.0.1:$MY_PORT"
    # --no-defaults: the system my.cnf must not change our server. skip-name-resolve makes
    # 127.0.0.1 connections match '%' accounts instead of 'localhost' ones.
    setsid mariadbd --no-defaults "${user_opt[@]}" --datadir="$MY_DIR" --port="$MY_PORT" \
        --bind-address=127.0.0.1 --socket="$MY_SOCK" --pid-file="$MY_RUN/mariadb.pid" \
        --log-error="$MY_DIR/server.log" --skip-name-resolve --innodb-flush-log-at-trx-commit=0 \
        --innodb-doublewrite=0 --character-set-server=utf8mb4 </dev/null >/dev/null 2>&1 &
    local i
    for i in $(seq 1 120); do
        my_running && break
        sleep 0.25
    done
    my_running || { tail -20 "$MY_DIR/server.log" >&2; die "MariaDB did not start"; }
    my_super -e "CREATE USER IF NOT EXISTS '$MY_SUPER'@'%' IDENTIFIED BY '$MY_PASS';
        GRANT ALL PRIVILEGES ON *.* TO '$MY_SUPER'@'%' WITH GRANT OPTION;"
}

my_loaded() {
    [ "$(my_super -N -B -e "SELECT 1 FROM grid_sql_meta.loaded
        WHERE name = '$1' AND version = $DATA_VERSION" 2>/dev/null)" = 1 ]
}
my_mark() {
    my_super -e "REPLACE INTO grid_sql_meta.loaded VALUES ('$1', $DATA_VERSION)"
}

my_load_all() {
    my_super -e "CREATE DATABASE IF NOT EXISTS grid_sql_meta;
        CREATE TABLE IF NOT EXISTS grid_sql_meta.loaded (name varchar(64) PRIMARY KEY, version int)"
    if ! my_loaded chinook; then
        log "MariaDB: loading Chinook"
        my_super <"$DATA/chinook/Chinook_MySql.sql"
        my_mark chinook
    fi
    if ! my_loaded sakila; then
        log "MariaDB: loading sakila"
        # The schema file drops and recreates schema sakila.
        my_super <"$DATA/sakila/mysql/sakila-schema.sql"
        my_super <"$DATA/sakila/mysql/sakila-data.sql"
        my_mark sakila
    fi
}

my_stop() {
    if my_running; then
        log "stopping MariaDB"
        mariadb-admin --protocol=socket --socket="$MY_SOCK" -u root shutdown
    fi
}

# ---------------------------------------------------------------- commands
print_env() {
    # Superuser URLs for test setup (creating roles, granting); tests connect as other roles.
    echo "export GRID_SQL_PG_URL=postgresql+psycopg://$PG_SUPER:$PG_PASS@127.0.0.1:$PG_PORT/postgres"
    echo "export GRID_SQL_MYSQL_URL=mysql+pymysql://$MY_SUPER:$MY_PASS@127.0.0.1:$MY_PORT/"
}

cmd_start() {
    [ -d "$DATA" ] || die "shared data not found at $DATA (set GRID_SQL_SHARED)"
    local t0=$SECONDS
    install_missing
    pg_start
    my_start
    # The two servers load independently; run them side by side.
    my_load_all &
    local my_pid=$!
    pg_load_all
    wait "$my_pid" || die "MariaDB data load failed"
    log "ready in $((SECONDS - t0)) s"
}

case "${1:-}" in
    start) cmd_start ;;
    stop) pg_stop; my_stop ;;
    env) print_env ;;
    status)
        if pg_running; then echo "postgresql: running on 127.0.0.1:$PG_PORT"; else echo "postgresql: stopped"; fi
        if my_running; then echo "mariadb: running on 127.0.0.1:$MY_PORT"; else echo "mariadb: stopped"; fi
        ;;
    *) echo "usage: $0 start|stop|env|status" >&2; exit 2 ;;
esac
