#!/bin/sh
# Start PostgreSQL, make one schema per env server (AGENTENV_SCHEMAS, comma-separated; kept
# when they exist: a durable store keeps its rows), then say ready (the healthcheck's file).
set -e
rm -f /tmp/agentenv-ready
# a durable store's last container was removed, not stopped: its lock file is stale
rm -f /var/lib/postgresql/15/main/postmaster.pid
pg_ctlcluster 15 main start
IFS=,
for schema in $AGENTENV_SCHEMAS; do
  PGPASSWORD=agentenv psql -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -U agentenv -d agentenv \
    -c "CREATE SCHEMA IF NOT EXISTS \"$schema\""
done
touch /tmp/agentenv-ready
echo "servicedb ready: schemas ${AGENTENV_SCHEMAS:-none}"
trap 'pg_ctlcluster 15 main stop; exit 0' TERM INT
while pg_ctlcluster 15 main status >/dev/null 2>&1; do sleep 1 & wait $!; done
echo "postgresql stopped" >&2
exit 1
