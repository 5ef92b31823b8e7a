package app_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
)

// TestClientKeepsConnectionsForConcurrentUse: a Client used by several
// goroutines at once keeps its connections between requests instead of
// dialing again for most of them. Every round has all its requests in
// flight at once (the handler answers when the last has come), so the
// first needs one connection per goroutine and the others none.
func TestClientKeepsConnectionsForConcurrentUse(t *testing.T) {
	const clients, rounds = 16, 5
	type round struct {
		arrived atomic.Int64
		all     chan struct{}
	}
	var cur atomic.Pointer[round]
	var dialed atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rd := cur.Load()
		if rd.arrived.Add(1) == clients {
			close(rd.all)
		}
		<-rd.all
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialed.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	c := app.NewClient(srv.URL, "")
	for range rounds {
		cur.Store(&round{all: make(chan struct{})})
		var wg sync.WaitGroup
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := c.Do(context.Background(), http.MethodGet, "/v1/status", "", nil, nil); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	require.Equal(t, int64(clients), dialed.Load(), "connections dialed for %d rounds of %d requests at once", rounds, clients)
}
