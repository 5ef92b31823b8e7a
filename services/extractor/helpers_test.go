package extractor_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/extractor"
	"github.com/kgstream/kgstream/services/extractor/chunk"
)

// own is this package's small corpus of invented postmortems, laid out as
// the seed corpus is (docs/<id>.txt, catalog-info.yaml and a recorded LLM
// extraction).
const own = "testdata/postmortems"

// ownIDs are the documents of own.
var ownIDs = []string{"PM-1", "PM-2", "PM-3", "PM-4"}

// tokenizer is loaded once per test binary: loading cl100k_base takes a
// moment and every worker of every test can share it.
var tokenizer = sync.OnceValues(chunk.NewTokenizer)

func tok(t *testing.T) *chunk.Tokenizer {
	t.Helper()
	tk, err := tokenizer()
	require.NoError(t, err)
	return tk
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// startBus runs a real JetStream server in-process with an in-memory
// stream.
func startBus(t *testing.T) *stream.Bus {
	t.Helper()
	return streamtest.NewBus(t, streamtest.Options{Config: stream.Config{Storage: jetstream.MemoryStorage},
		Log: testLogger(t), Metrics: stream.NewMetrics(nil)})
}

// startWorker runs a worker until the test ends, waiting for Run to return.
func startWorker(t *testing.T, bus *stream.Bus, ext extractor.Extractor, reg prometheus.Registerer, mut func(*extractor.Config)) *extractor.Worker {
	t.Helper()
	cfg := extractor.Config{Tokenizer: tok(t), MaxDeliver: 3, Backoff: []time.Duration{20 * time.Millisecond}}
	if mut != nil {
		mut(&cfg)
	}
	w, err := extractor.New(cfg, bus, ext, testLogger(t), reg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return w
}

// eventually polls cond until it holds (see streamtest.Eventually).
func eventually(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	streamtest.Eventually(t, timeout, cond)
}

// messages returns the stream's messages on subject, in order.
func messages(t *testing.T, bus *stream.Bus, subject string) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx := t.Context()
	st, err := bus.JetStream().Stream(ctx, bus.StreamName())
	require.NoError(t, err)
	info, err := st.Info(ctx)
	require.NoError(t, err)
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		require.NoError(t, err)
		if m.Subject == subject {
			out = append(out, m)
		}
	}
	return out
}

// waitExtracted waits for n extracted events of tenant and decodes them.
func waitExtracted(t *testing.T, bus *stream.Bus, tenant string, n int) []events.Extracted {
	t.Helper()
	subject := bus.Subjects().For(events.KindExtracted, tenant)
	var msgs []*jetstream.RawStreamMsg
	eventually(t, 20*time.Second, func() error {
		msgs = messages(t, bus, subject)
		if len(msgs) < n {
			return fmt.Errorf("%d of %d extracted events", len(msgs), n)
		}
		return nil
	})
	out := make([]events.Extracted, len(msgs))
	for i, m := range msgs {
		require.NoError(t, events.Decode(m.Data, &out[i]))
		require.Equal(t, events.ExtractedID(tenant, out[i].DocID, out[i].Version, 0), m.Header.Get(jetstream.MsgIDHeader))
	}
	// The worker extracts several documents at once, so extractions are
	// published in any order: they are returned in the order of the
	// changes they come from (then in publication order).
	first := map[[2]string]int{}
	for i, m := range messages(t, bus, bus.Subjects().For(events.KindDocChanged, tenant)) {
		var ev events.DocChanged
		require.NoError(t, events.Decode(m.Data, &ev))
		k := [2]string{ev.DocID, strconv.FormatInt(ev.Version, 10)}
		if _, ok := first[k]; !ok {
			first[k] = i
		}
	}
	slices.SortStableFunc(out, func(a, b events.Extracted) int {
		return cmp.Compare(first[[2]string{a.DocID, strconv.FormatInt(a.Version, 10)}],
			first[[2]string{b.DocID, strconv.FormatInt(b.Version, 10)}])
	})
	return out
}

// waitDeadLetters waits for n dead letters of a stage.
func waitDeadLetters(t *testing.T, bus *stream.Bus, stage string, n int) []stream.DeadLetter {
	t.Helper()
	var msgs []*jetstream.RawStreamMsg
	eventually(t, 20*time.Second, func() error {
		msgs = messages(t, bus, bus.Subjects().DLQ(stage))
		if len(msgs) < n {
			return fmt.Errorf("%d of %d dead letters", len(msgs), n)
		}
		return nil
	})
	out := make([]stream.DeadLetter, len(msgs))
	for i, m := range msgs {
		require.NoError(t, json.Unmarshal(m.Data, &out[i]))
	}
	return out
}

// ownDoc reads one of this package's postmortems as a DocChanged.
func ownDoc(t *testing.T, tenant, id string, version int64) *events.DocChanged {
	t.Helper()
	return docIn(t, own, tenant, id, version)
}

// docIn reads a postmortem of a corpus directory as a DocChanged.
func docIn(t *testing.T, dir, tenant, id string, version int64) *events.DocChanged {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(dir, "docs", id+".txt"))
	require.NoError(t, err, "corpus %s is required", dir)
	return &events.DocChanged{Header: events.Header{Tenant: tenant}, DocID: id, Version: version,
		Source: "test", DocType: "incident", Title: "Postmortem " + id, Text: strings.TrimSpace(string(text)),
		ACL: provenance.PublicACL(), ReceivedAt: time.Date(2025, 1, 9, 12, 0, 0, 0, time.UTC)}
}

func publishDoc(t *testing.T, bus *stream.Bus, doc *events.DocChanged) {
	t.Helper()
	_, err := bus.Publish(t.Context(), events.KindDocChanged, doc.Tenant,
		events.ChangedID(doc.Tenant, doc.DocID, doc.Version), doc)
	require.NoError(t, err)
}

// triples renders relationships as sorted "type:name -rel-> type:name".
func triples(rels []events.RawRelationship) []string {
	out := make([]string, 0, len(rels))
	for _, r := range rels {
		out = append(out, r.SourceType+":"+r.Source+" -"+r.Relation+"-> "+r.TargetType+":"+r.Target)
	}
	slices.Sort(out)
	return out
}

// ownRecorded reads the triples per document of own's recording.
func ownRecorded(t *testing.T) map[string][]string {
	t.Helper()
	return recordedIn(t, own)
}

// recordedIn reads the triples per document of a corpus's recording.
func recordedIn(t *testing.T, dir string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "recorded-llm-extraction.json"))
	require.NoError(t, err, "the recording of %s is required", dir)
	var rec map[string][]events.RawRelationship
	require.NoError(t, json.Unmarshal(data, &rec))
	out := map[string][]string{}
	for id, rels := range rec {
		out[id] = triples(rels)
	}
	return out
}
