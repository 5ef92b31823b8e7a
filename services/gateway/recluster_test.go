package gateway_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
)

// TestReclusterPublishesARequest: an admin's request to re-cluster
// publishes one kg.recluster request of the caller's tenant, full or not
// as asked, under its own message id; a writer's is refused, and so is a
// malformed body, and neither publishes anything. A request the stream
// refuses is accepted as queued, kept in the outbox and published once
// the stream takes it again.
func TestReclusterPublishesARequest(t *testing.T) {
	f, g := setupOutbox(t)
	code, out := f.do(t, "POST", "/v1/communities/recluster", "w", `{"full":true}`)
	require.Equal(t, 403, code, "%v", out)
	code, out = f.do(t, "POST", "/v1/communities/recluster", "root", `{"full":"yes"}`)
	require.Equal(t, 400, code, "%v", out)
	code, out = f.do(t, "POST", "/v1/communities/recluster", "root", `{"fully":true}`)
	require.Equal(t, 400, code, "%v", out)
	require.Empty(t, kindMessages(t, f, events.KindRecluster), "a refused request published")

	code, out = f.do(t, "POST", "/v1/communities/recluster", "root", `{"full":true}`)
	require.Equal(t, 202, code, "%v", out)
	require.Equal(t, true, out["full"])
	require.Equal(t, "acme", out["tenant"])
	code, out = f.do(t, "POST", "/v1/communities/recluster", "root", `{}`)
	require.Equal(t, 202, code, "%v", out)
	require.Equal(t, false, out["full"])

	reqs := kindMessages(t, f, events.KindRecluster)
	require.Len(t, reqs, 2)
	var full []bool
	for _, m := range reqs {
		require.Equal(t, "kg.recluster.acme", m.Subject)
		ev, err := stream.DecodeTyped[events.Recluster](&stream.Message{Tenant: "acme", Subject: m.Subject, Data: m.Data})
		require.NoError(t, err)
		require.Equal(t, events.ReclusterID("acme", ev.RequestID), m.Header.Get("Nats-Msg-Id"))
		full = append(full, ev.Full)
	}
	require.Equal(t, []bool{true, false}, full)

	// A request the stream refuses is accepted as queued (a retry would
	// be a second request) and published once the stream takes it.
	restore := streamtest.Narrow(t, f.bus, events.KindRecluster)
	code, out = f.do(t, "POST", "/v1/communities/recluster", "root", `{"full":true}`)
	require.Equal(t, 202, code, "%v", out)
	require.Equal(t, true, out["queued"])
	require.Len(t, kindMessages(t, f, events.KindRecluster), 2)
	restore()
	runOutbox(t, g)
	streamtest.Eventually(t, 20*time.Second, func() error {
		if n := len(kindMessages(t, f, events.KindRecluster)); n != 3 {
			return fmt.Errorf("%d re-clustering requests on the stream", n)
		}
		return nil
	})
}
