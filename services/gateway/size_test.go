package gateway_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/services/gateway"
)

func bigBody(id string, n int) string {
	var sb strings.Builder
	for i := 0; sb.Len() < n; i++ {
		fmt.Fprintf(&sb, "line %d of the runbook names cache-%d. ", i, i%50)
	}
	body, _ := json.Marshal(map[string]any{"id": id, "text": sb.String()[:n]})
	return string(body)
}

func TestLargeDocumentsAreCarried(t *testing.T) {
	// A 3.5 MB document, within the documented 4 MiB body limit, is
	// accepted and its whole event is carried.
	f := setupWith(t, gateway.Config{})
	status, out := f.do(t, "POST", "/v1/documents", "w", bigBody("big", 3_500_000))
	require.Equal(t, 202, status, "%v", out)
	c, err := f.bus.JetStream().OrderedConsumer(t.Context(), f.bus.StreamName(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{f.bus.Subjects().For(events.KindDocChanged, "acme")}})
	require.NoError(t, err)
	msg, err := c.Next()
	require.NoError(t, err)
	require.True(t, stream.ByReference(msg))
	data, err := f.bus.EventData(t.Context(), msg)
	require.NoError(t, err)
	var ev events.DocChanged
	require.NoError(t, events.Decode(data, &ev))
	require.Len(t, ev.Text, 3_500_000)

	// What the gateway cannot carry is refused before anything is written.
	small := setupWith(t, gateway.Config{MaxEventBytes: 2 << 20})
	before := small.streamCount(t)
	status, out = small.do(t, "POST", "/v1/documents", "w", bigBody("big", 3_500_000))
	require.Equal(t, 413, status, "%v", out)
	require.Equal(t, "event_too_large", errCode(out))
	require.Equal(t, before, small.streamCount(t))
	srcs, err := small.reg.Sources(t.Context(), "acme", []string{"big"})
	require.NoError(t, err)
	require.Empty(t, srcs, "a refused document is not in the registry")
}
