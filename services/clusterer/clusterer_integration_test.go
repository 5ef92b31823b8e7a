//go:build integration

package clusterer_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/services/clusterer"
)

// TestSeedMatchesGraphRAG checks that re-clustering the resolved seed graph
// gives, level by level, the member sets graspologic-native (Microsoft
// GraphRAG's Leiden) gives on the same graph, and that nothing is dropped.
func TestSeedMatchesGraphRAG(t *testing.T) {
	e := newEnv(t, seedConfig())
	applySeed(t, e.st)
	require.NoError(t, e.w.Recluster(t.Context(), tenant))

	cs := communities(t, e.st)
	want := fixtureLevels(t, "seed-postmortems.hier6.tsv")
	require.Equal(t, want, levels(cs, names(t, e.st)))
	require.Len(t, want[0], 6, "README: level 0 has 6 communities")

	// Every entity in exactly one level-0 community: every connected
	// component is clustered, INC-118's included.
	es, err := e.st.EntitiesByType(t.Context(), tenant, "")
	require.NoError(t, err)
	in := map[string]int{}
	for _, c := range cs {
		if c.Level == 0 {
			for _, m := range c.Members {
				in[m]++
			}
		}
	}
	for _, ent := range es {
		require.Equal(t, 1, in[ent.ID], "entity %s in level-0 communities", ent.ID)
	}
	inc118 := resolve.ID("incident", "INC-118")
	var dns *store.Community
	for i, c := range cs {
		if c.Level == 0 && slices.Contains(c.Members, inc118) {
			dns = &cs[i]
		}
	}
	require.NotNil(t, dns, "INC-118's community is present")
	require.Contains(t, dns.Members, resolve.ID("failure_mode", "dns misconfiguration"))

	// Hierarchy: level-1 communities refine their parent.
	byID := map[string]store.Community{}
	for _, c := range cs {
		byID[c.ID] = c
	}
	for _, c := range cs {
		require.Equal(t, clusterer.CommunityID(c.Level, clusterer.MemberHash(c.Members)), c.ID)
		require.Equal(t, int64(1), c.Run)
		require.NotEmpty(t, c.Sources)
		if c.Level == 0 {
			require.Empty(t, c.Parent)
			continue
		}
		p, ok := byID[c.Parent]
		require.True(t, ok, "parent of %s", c.ID)
		require.Equal(t, c.Level-1, p.Level)
		require.Contains(t, p.Children, c.ID)
		for _, m := range c.Members {
			require.Contains(t, p.Members, m)
		}
	}

	require.Equal(t, 1.0, metric(t, e.reg, "kgstream_community_coverage_ratio", map[string]string{"tenant": tenant}).GetGauge().GetValue())
}

// TestEditINC121 runs the worker against the stream: after INC-121's edit
// (EXPECTED.md: its failure becomes "bad upgrade") the new entity first
// joins its strongest neighbour's communities without any announcement;
// the re-clustering then announces exactly the communities whose member
// sets changed (two of six at level 0, the seed's account), keeps the ids
// of all others, and lists exactly those in kg.communities.changed.
func TestEditINC121(t *testing.T) {
	clock := newFakeClock()
	cfg := seedConfig()
	cfg.Quiet, cfg.MaxDelay, cfg.Tick, cfg.Now = time.Minute, time.Hour, 5*time.Millisecond, clock.Now
	e := newEnv(t, cfg)
	applySeed(t, e.st)
	e.run(t)
	e.waitConsumer(t) // Run has marked the tenant dirty

	// Start-up re-clustering, after the quiet period.
	clock.Advance(time.Minute)
	waitRun(t, e.st, 1)
	before := communities(t, e.st)
	evs := waitAnnouncements(t, e.bus, 1)
	require.Len(t, evs[0].Changed, len(before), "the first run announces every community")
	require.Empty(t, evs[0].Removed)

	res := editINC121(t, e.st)
	badUpgrade := resolve.ID("failure_mode", "bad upgrade")
	inc121 := resolve.ID("incident", "INC-121")
	require.Contains(t, res.Touched, badUpgrade)
	e.publish(t, "INC-121", 2, res)
	e.waitHandled(t)

	// Between re-clusterings: "bad upgrade" joins every community of
	// INC-121, its only (hence strongest) neighbour; ids and member hashes
	// stay, nothing is announced.
	eventually(t, 20*time.Second, func() error {
		for _, c := range communities(t, e.st) {
			if slices.Contains(c.Members, badUpgrade) {
				return nil
			}
		}
		return fmt.Errorf("bad upgrade is in no community yet")
	})
	provisional := communities(t, e.st)
	require.Len(t, provisional, len(before))
	for i, c := range provisional {
		b := before[i]
		require.Equal(t, b.ID, c.ID)
		require.Equal(t, b.MemberHash, c.MemberHash)
		if slices.Contains(b.Members, inc121) {
			require.True(t, slices.IsSorted(c.Members))
			require.ElementsMatch(t, append(slices.Clone(b.Members), badUpgrade), c.Members)
			require.Contains(t, c.Sources, sourceRef("INC-121", 2))
		} else {
			require.Equal(t, b.Members, c.Members)
		}
	}
	require.Equal(t, int64(1), lastRun(t, e.st))
	require.Len(t, announcements(t, e.bus), 1)

	// The re-clustering.
	clock.Advance(time.Minute)
	waitRun(t, e.st, 2)
	after := communities(t, e.st)
	evs = waitAnnouncements(t, e.bus, 2)
	ev := evs[1]
	require.Equal(t, int64(2), ev.Run)

	oldBySet := map[string]string{}
	for _, c := range before {
		oldBySet[memberSet(c)] = c.ID
	}
	newBySet := map[string]bool{}
	var wantChanged []events.CommunityChange
	changedAt := map[int]int{}
	for _, c := range after {
		newBySet[memberSet(c)] = true
		if id, ok := oldBySet[memberSet(c)]; ok {
			require.Equal(t, id, c.ID, "an unchanged member set keeps its id")
			continue
		}
		wantChanged = append(wantChanged, events.CommunityChange{ID: c.ID, Level: c.Level, MemberHash: c.MemberHash})
		changedAt[c.Level]++
	}
	var wantRemoved []string
	for _, c := range before {
		if !newBySet[memberSet(c)] {
			wantRemoved = append(wantRemoved, c.ID)
		}
	}
	slices.Sort(wantRemoved)
	require.ElementsMatch(t, wantChanged, ev.Changed, "the event lists exactly the new member sets")
	require.Equal(t, wantRemoved, ev.Removed, "and exactly the member sets that are gone")

	level0 := 0
	for _, c := range after {
		if c.Level == 0 {
			level0++
		}
	}
	require.Equal(t, 6, level0)
	require.Equal(t, 2, changedAt[0], "two of six level-0 communities changed")
	// The re-clustering placed "bad upgrade" with INC-121 at every level
	// (the provisional guess held), and that member set is announced.
	changedIDs := map[string]bool{}
	for _, ch := range ev.Changed {
		changedIDs[ch.ID] = true
	}
	for _, c := range after {
		if slices.Contains(c.Members, badUpgrade) {
			require.Contains(t, c.Members, inc121)
			require.True(t, changedIDs[c.ID], "%s holds the new entity, so it is announced", c.ID)
		}
	}

	// Refreshed: same member set, but a source moved to another version
	// (INC-121 v1 -> v2), so its report is no longer admissible.
	for _, r := range ev.Refreshed {
		require.NotContains(t, ev.Changed, r)
		var b, a store.Community
		for _, c := range before {
			if c.ID == r.ID {
				b = c
			}
		}
		for _, c := range after {
			if c.ID == r.ID {
				a = c
			}
		}
		require.Equal(t, b.Members, a.Members)
		require.Contains(t, b.Sources, sourceRef("INC-121", 1))
		require.Contains(t, a.Sources, sourceRef("INC-121", 2))
	}
	require.NotEmpty(t, ev.Refreshed, "notification-service's community cites INC-121")
	require.Equal(t, 1.0, metric(t, e.reg, "kgstream_community_coverage_ratio", map[string]string{"tenant": tenant}).GetGauge().GetValue())
}

// TestMetrics checks the re-clustering metrics: duration, communities
// changed and total, and coverage.
func TestMetrics(t *testing.T) {
	e := newEnv(t, seedConfig())
	applySeed(t, e.st)
	require.NoError(t, e.w.Recluster(t.Context(), tenant))
	first := len(communities(t, e.st))
	require.Equal(t, 16, first, "6 level-0 and 10 level-1 communities")

	labels := map[string]string{"tenant": tenant}
	require.Equal(t, uint64(1), metric(t, e.reg, "kgstream_recluster_duration_seconds", labels).GetHistogram().GetSampleCount())
	require.Equal(t, float64(first), metric(t, e.reg, "kgstream_communities", labels).GetGauge().GetValue())
	require.Equal(t, float64(first), metric(t, e.reg, "kgstream_communities_last_changed", labels).GetGauge().GetValue())
	require.Equal(t, float64(first), metric(t, e.reg, "kgstream_communities_changed_total", map[string]string{"kind": "changed"}).GetCounter().GetValue())
	require.Equal(t, 1.0, metric(t, e.reg, "kgstream_community_coverage_ratio", labels).GetGauge().GetValue())

	editINC121(t, e.st)
	require.NoError(t, e.w.Recluster(t.Context(), tenant))
	ev := announcements(t, e.bus)[1]
	require.Equal(t, uint64(2), metric(t, e.reg, "kgstream_recluster_duration_seconds", labels).GetHistogram().GetSampleCount())
	require.Equal(t, float64(len(communities(t, e.st))), metric(t, e.reg, "kgstream_communities", labels).GetGauge().GetValue())
	require.Equal(t, float64(len(ev.Changed)), metric(t, e.reg, "kgstream_communities_last_changed", labels).GetGauge().GetValue())
	require.Equal(t, float64(first+len(ev.Changed)), metric(t, e.reg, "kgstream_communities_changed_total", map[string]string{"kind": "changed"}).GetCounter().GetValue())
	require.Equal(t, float64(len(ev.Refreshed)), metric(t, e.reg, "kgstream_communities_changed_total", map[string]string{"kind": "refreshed"}).GetCounter().GetValue())
	require.Equal(t, float64(len(ev.Removed)), metric(t, e.reg, "kgstream_communities_changed_total", map[string]string{"kind": "removed"}).GetCounter().GetValue())
	require.Equal(t, 1.0, metric(t, e.reg, "kgstream_community_coverage_ratio", labels).GetGauge().GetValue())
}
