package stream

import (
	"testing"

	"github.com/nats-io/nats.go"
)

// TestConnectLeavesAMatchingStream: the configuration the server keeps
// for a stream Connect created matches what Connect asks for, so the next
// Connect does not update it (see Connect).
func TestConnectLeavesAMatchingStream(t *testing.T) {
	nc := EmbeddedConn(t)
	b, err := Connect(t.Context(), Config{Conn: nc}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Conn: nc}
	cfg.setDefaults()
	st, err := b.js.Stream(t.Context(), cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if have := st.CachedInfo().Config; !sameStreamConfig(have, streamConfig(cfg)) {
		t.Fatalf("the stored configuration %+v does not match what Connect asks for", have)
	}
	other := cfg
	other.MaxAge++
	if sameStreamConfig(st.CachedInfo().Config, streamConfig(other)) {
		t.Fatal("another MaxAge matches")
	}
}

// EmbeddedConn starts an embedded server for the test and connects to it
// (the package's external tests use it too).
func EmbeddedConn(t *testing.T) *nats.Conn {
	t.Helper()
	emb, err := StartEmbedded(EmbeddedConfig{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	nc, err := emb.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}
