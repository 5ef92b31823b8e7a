package streamtest

import (
	"slices"
	"testing"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/stream"
)

// kinds are the event kinds a bus's stream takes.
var kinds = []events.Kind{events.KindDocChanged, events.KindDocDeleted, events.KindDocACL, events.KindExtracted,
	events.KindGraphChanged, events.KindCommunitiesChanged, events.KindReportsChanged, events.KindReresolve, events.KindRecluster, events.KindDLQ}

// Narrow makes bus's stream take every event kind but those in without,
// so publishing one of them fails (no stream answers), as when JetStream
// refuses it. The returned function restores the stream.
func Narrow(t testing.TB, bus *stream.Bus, without ...events.Kind) (restore func()) {
	t.Helper()
	ctx := t.Context()
	s, err := bus.JetStream().Stream(ctx, bus.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	orig := info.Config
	cfg := orig
	cfg.Subjects = nil
	for _, k := range kinds {
		if !slices.Contains(without, k) {
			cfg.Subjects = append(cfg.Subjects, bus.Subjects().All(k))
		}
	}
	if _, err := bus.JetStream().UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if _, err := bus.JetStream().UpdateStream(ctx, orig); err != nil {
			t.Fatal(err)
		}
	}
}
