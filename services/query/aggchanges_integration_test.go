//go:build integration

package query_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
)

// TestAggregatesFollowGraphChanges: while the service follows the bus, a
// graph change (a new incident, an edit moving it to another failure
// mode, a deletion) patches the relation lists aggregates read, for the
// entities the event names, instead of reading the relation again:
// aggregates by the relation's subjects and by its objects (~failure)
// answer exactly as a service without caches does, citations included,
// and the relation is read once. An event that does not name every
// entity it changed drops the lists: the relation is then read again.
func TestAggregatesFollowGraphChanges(t *testing.T) {
	f, cs, bus := newCachingFixture(t)
	cold := coldFixture(t, cs.Stores)
	paths := []string{"/v1/aggregate?type=incident&rel=failure", "/v1/aggregate?type=failure_mode&rel=~failure"}
	body := func(f *fixture, path string) string {
		var raw json.RawMessage
		f.get(path, tokAlice, 200, &raw)
		return string(raw)
	}
	// same waits until the live service answers every aggregate as the
	// cold one.
	same := func() {
		t.Helper()
		streamtest.Eventually(t, 10*time.Second, func() error {
			for _, p := range paths {
				if got, want := body(f, p), body(cold, p); got != want {
					return fmt.Errorf("%s: live\n%s\ncold\n%s", p, got, want)
				}
			}
			return nil
		})
	}
	// A global question counts the entities of its theme types
	// (visibleCount): the first builds the tenant's name index, and later
	// ones take it patched for the changes since.
	globalQ := map[string]any{"mode": "global", "question": "What are the recurring root causes of our incidents?"}
	streamtest.Eventually(t, 10*time.Second, func() error {
		cs.reset()
		ask(t, f, tokAlice, globalQ)
		ask(t, f, tokAlice, globalQ)
		if n := cs.reset()["EntitiesByType()"]; n != 1 {
			return fmt.Errorf("%d listings of every entity for two global questions", n)
		}
		return nil
	})
	streamtest.Eventually(t, 10*time.Second, func() error {
		cs.reset()
		for range 2 {
			for _, p := range paths {
				body(f, p)
			}
		}
		if n := cs.reset()["EdgesByRelation"]; n > len(paths) {
			return fmt.Errorf("%d relation reads for two rounds of %d aggregates", n, len(paths))
		}
		return nil
	})
	inc := func(doc, target, name string) *store.Contributions {
		return &store.Contributions{Title: doc, DocType: "postmortem",
			Entities: []store.EntityContribution{
				{ID: "incident:" + strings.ToLower(strings.ReplaceAll(doc, "-", "")), Type: "incident", Name: doc, NameRank: 2},
				{ID: target, Type: "failure_mode", Name: name, NameRank: 2},
			},
			Edges: []store.EdgeContribution{{Source: "incident:" + strings.ToLower(strings.ReplaceAll(doc, "-", "")), Relation: "failure", Target: target, Weight: 1}}}
	}
	steps := []struct {
		name    string
		version int64
		c       *store.Contributions
		want    string // a group the aggregate by incident then holds, or must not
		holds   bool
	}{
		{"a new incident of a known failure mode", 1, inc("INC-170", "failure_mode:expiredcertificate", "expired certificate"), "INC-170", true},
		{"an edit moving it to a new failure mode", 2, inc("INC-170", "failure_mode:clockskew", "clock skew"), "clock skew", true},
		{"its deletion", 3, nil, "INC-170", false},
	}
	for _, s := range steps {
		cs.reset()
		applyAnnounced(t, f.st, bus, "INC-170", s.version, s.c)
		same()
		require.Equal(t, s.holds, strings.Contains(body(f, paths[0]), s.want), "%s: %s", s.name, body(f, paths[0]))
		calls := cs.reset()
		require.Zero(t, calls["EdgesByRelation"], "%s: the relation lists are patched, not read again: %v", s.name, calls)
		require.NotZero(t, calls["Edges incident:inc170"]+calls["EdgesAmong incident:inc170"],
			"%s: the named incident's edges are read (once read, patched): %v", s.name, calls)
		require.Zero(t, calls["Edges incident:inc101"]+calls["EdgesAmong incident:inc101"], "%s: those of an incident not named are not: %v", s.name, calls)
		ask(t, f, tokAlice, globalQ)
		calls = cs.reset()
		for _, typ := range []string{"", "incident", "failure_mode"} {
			require.Zero(t, calls["EntitiesByType("+typ+")"], "%s: the name index is patched, no type listed: %v", s.name, calls)
		}
	}

	// An event naming no entity: the lists are read again.
	announceApply(t, f.st, tenantAcme, "INC-171", 1, incidentACL(), *inc("INC-171", "failure_mode:clockskew", "clock skew"))
	_, err := bus.Publish(t.Context(), events.KindGraphChanged, tenantAcme, "graph-INC-171-1",
		&events.GraphChanged{Header: events.Header{Tenant: tenantAcme}, DocID: "INC-171", Version: 1})
	require.NoError(t, err)
	cs.reset()
	same()
	require.NotZero(t, cs.reset()["EdgesByRelation"], "read again after an event that does not name all it changed")
}
