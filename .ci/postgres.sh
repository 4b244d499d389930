# Sourced: a throwaway PostgreSQL cluster on a free loopback port, started as the postgres user (the
# server refuses root), stopped and deleted when the sourcing shell exits; exports its URL as
# AUTOFUSE_TEST_PG_URL. The server comes from PG_BIN_DIR when set (a folder with initdb, pg_ctl,
# createdb), else from PATH or Debian's /usr/lib/postgresql (installed with apt when missing).
pg_bin() {
  if [ -n "${PG_BIN_DIR:-}" ] && [ -x "$PG_BIN_DIR/$1" ]; then echo "$PG_BIN_DIR/$1"; return; fi
  command -v "$1" 2>/dev/null || ls -d /usr/lib/postgresql/*/bin/"$1" 2>/dev/null | sort -V | tail -n 1
}
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
if [ -z "$(pg_bin initdb)" ] || [ -z "$(pg_bin pg_ctl)" ]; then
  as_root apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql
fi
if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then useradd --system --no-create-home postgres; fi
PG_CTL=$(pg_bin pg_ctl)
PG_TMP=$(mktemp -d /tmp/autofuse-ci-pg.XXXXXX)
trap 'as_pg "$PG_CTL" -D "$PG_TMP/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$PG_TMP"' EXIT
if [ "$(id -u)" = 0 ]; then chown postgres "$PG_TMP"; fi
PG_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
as_pg "$(pg_bin initdb)" -D "$PG_TMP/data" -U postgres --auth=trust -E UTF8 --locale=C --no-sync >/dev/null
as_pg "$PG_CTL" -D "$PG_TMP/data" -l "$PG_TMP/log" -w -t 60 \
  -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $PG_TMP -c fsync=off -c full_page_writes=off" start >/dev/null \
  || { cat "$PG_TMP/log" >&2; exit 1; }
"$(pg_bin createdb)" -h 127.0.0.1 -p "$PG_PORT" -U postgres autofuse_test
export AUTOFUSE_TEST_PG_URL="postgresql+psycopg://postgres@127.0.0.1:$PG_PORT/autofuse_test"
echo "PostgreSQL for the tuning-DB tests: $AUTOFUSE_TEST_PG_URL"
