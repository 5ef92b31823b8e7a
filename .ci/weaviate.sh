#!/usr/bin/env bash
# Makes sure a Weaviate server answers where the vector tests look for it
# (KG_TEST_WEAVIATE_URL, default http://127.0.0.1:8090, gRPC on
# KG_TEST_WEAVIATE_GRPC, default 127.0.0.1:50051). Idempotent: it installs
# weaviate-server only when missing and starts it only when nothing answers.
# The data dir lives under /tmp; the server keeps running after the script.
#
# Other ports (so it never clashes with a kgstream dev server's Weaviate):
#   KG_TEST_WEAVIATE_GOSSIP_PORT (7100), KG_TEST_WEAVIATE_DATA_PORT (7101),
#   KG_TEST_WEAVIATE_RAFT_PORT (8300), KG_TEST_WEAVIATE_RAFT_RPC_PORT (8301).
set -euo pipefail

WEAVIATE_VERSION=v1.35.2
URL=${KG_TEST_WEAVIATE_URL:-http://127.0.0.1:8090}
GRPC=${KG_TEST_WEAVIATE_GRPC:-127.0.0.1:50051}
GOSSIP_PORT=${KG_TEST_WEAVIATE_GOSSIP_PORT:-7100}
DATA_PORT=${KG_TEST_WEAVIATE_DATA_PORT:-7101}
RAFT_PORT=${KG_TEST_WEAVIATE_RAFT_PORT:-8300}
RAFT_RPC_PORT=${KG_TEST_WEAVIATE_RAFT_RPC_PORT:-8301}
WAIT_SECONDS=${KG_TEST_WEAVIATE_WAIT:-120}
DIR=${KG_TEST_WEAVIATE_DIR:-/tmp/kgstream-ci-weaviate}

hostport=${URL#*://}
hostport=${hostport%%/*}
HOST=${hostport%:*}
PORT=${hostport##*:}
GRPC_PORT=${GRPC##*:}
READY="$URL/v1/.well-known/ready"

ready() { curl -fsS -o /dev/null --max-time 2 "$READY" 2>/dev/null; }

if ready; then
  echo "weaviate: already answering on $URL"
  exit 0
fi

export PATH="$PATH:/usr/local/go/bin:$HOME/go/bin"
if ! command -v weaviate-server >/dev/null; then
  echo "weaviate: installing weaviate-server $WEAVIATE_VERSION (takes several minutes)"
  go install "github.com/weaviate/weaviate/cmd/weaviate-server@$WEAVIATE_VERSION"
fi
BIN=$(command -v weaviate-server)

mkdir -p "$DIR/data"
LOG="$DIR/weaviate.log"
echo "weaviate: starting $BIN on $URL (gRPC $GRPC_PORT), data in $DIR/data, log $LOG"
(
  cd "$DIR"
  PERSISTENCE_DATA_PATH="$DIR/data" \
  AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED=true \
  DEFAULT_VECTORIZER_MODULE=none \
  CLUSTER_HOSTNAME=node1 \
  RAFT_BOOTSTRAP_EXPECT=1 \
  RAFT_PORT="$RAFT_PORT" \
  RAFT_INTERNAL_RPC_PORT="$RAFT_RPC_PORT" \
  CLUSTER_IN_LOCALHOST=true \
  CLUSTER_ADVERTISE_ADDR=127.0.0.1 \
  CLUSTER_GOSSIP_BIND_PORT="$GOSSIP_PORT" \
  CLUSTER_DATA_BIND_PORT="$DATA_PORT" \
  DISABLE_TELEMETRY=true \
  GRPC_PORT="$GRPC_PORT" \
  LOG_LEVEL=warning \
  nohup "$BIN" --host "$HOST" --port "$PORT" --scheme http >>"$LOG" 2>&1 </dev/null &
  echo $! >"$DIR/weaviate.pid"
)
pid=$(cat "$DIR/weaviate.pid")

for _ in $(seq 1 "$WAIT_SECONDS"); do
  if ready; then
    echo "weaviate: ready on $URL (pid $pid)"
    exit 0
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "weaviate: server exited before it was ready; last lines of $LOG:" >&2
    tail -n 40 "$LOG" >&2
    exit 1
  fi
  sleep 1
done
echo "weaviate: not ready after ${WAIT_SECONDS}s; last lines of $LOG:" >&2
tail -n 40 "$LOG" >&2
exit 1
