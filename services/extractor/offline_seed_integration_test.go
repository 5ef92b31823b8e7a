//go:build integration

package extractor_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/catalog"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/services/extractor/chunk"
	"github.com/kgstream/kgstream/services/extractor/eval"
	"github.com/kgstream/kgstream/services/extractor/offline"
)

// catalogGazetteer is the seed catalog alone: what the all-in-one's store
// gazetteer holds after `kgstream catalog import`, no components.
func catalogGazetteer(t *testing.T) offline.StaticGazetteer {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(seed, "catalog-info.yaml"))
	require.NoError(t, err)
	st, _, err := catalog.Parse(data)
	require.NoError(t, err)
	var g offline.StaticGazetteer
	for _, e := range st.Entities {
		g = append(g, offline.Entry{ID: resolve.ID(e.Type, e.Key), Type: e.Type, Name: e.Name, Key: resolve.Key(e.Key)})
	}
	return g
}

// expectedFailures parses EXPECTED.md's root-cause counts:
// "- expired certificate 3 [INC-101, INC-112, INC-121]" -> name -> "3[INC-101 INC-112 INC-121]".
func expectedFailures(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(seed, "EXPECTED.md"))
	require.NoError(t, err)
	defer f.Close()
	line := regexp.MustCompile(`^- ([a-z ]+?) (\d+) \[([A-Z0-9, -]+)\]$`)
	out := map[string]string{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		switch l := sc.Text(); {
		case strings.HasPrefix(l, "Global question"):
			in = true
		case in && !strings.HasPrefix(l, "- "):
			in = len(out) == 0
		case in:
			m := line.FindStringSubmatch(l)
			require.NotNil(t, m, "EXPECTED.md line %q", l)
			out[m[1]] = m[2] + "[" + strings.Join(strings.Split(m[3], ", "), " ") + "]"
		}
	}
	require.NoError(t, sc.Err())
	require.Len(t, out, 5, "EXPECTED.md lists five root causes")
	return out
}

// aggregate groups the failure edges of the latest version of each
// document as the query service's aggregate does: failure mode -> count
// and member incidents.
func aggregate(exs []events.Extracted) map[string]string {
	latest := map[string]events.Extracted{}
	for _, ex := range exs {
		if cur, ok := latest[ex.DocID]; !ok || ex.Version > cur.Version {
			latest[ex.DocID] = ex
		}
	}
	members := map[string][]string{}
	for _, ex := range latest {
		names := map[string]string{}
		for _, e := range ex.Entities {
			if e.Type == offline.TypeFailureMode {
				names[resolve.Key(e.Name)] = e.Name
			}
		}
		for _, r := range ex.Relationships {
			if r.Relation == offline.RelFailure && r.TargetType == offline.TypeFailureMode {
				name := names[resolve.Key(r.Target)]
				if !slices.Contains(members[name], r.Source) {
					members[name] = append(members[name], r.Source)
				}
			}
		}
	}
	out := map[string]string{}
	for name, ms := range members {
		slices.Sort(ms)
		out[name] = fmt.Sprintf("%d[%s]", len(ms), strings.Join(ms, " "))
	}
	return out
}

func TestOfflineSeedFailuresMatchExpectedThroughWorker(t *testing.T) {
	bus := startBus(t)
	x, err := offline.New(offline.Config{Gazetteer: catalogGazetteer(t)})
	require.NoError(t, err)
	startWorker(t, bus, x, nil, nil)

	for _, id := range seedIDs {
		publishDoc(t, bus, seedDoc(t, "acme", id, 1))
	}
	got := waitExtracted(t, bus, "acme", len(seedIDs))
	require.Equal(t, expectedFailures(t), aggregate(got))

	// Every failure edge is supported by the document's text unit and
	// quotes the sentence with the cue.
	for _, ex := range got {
		var fails []events.RawRelationship
		for _, r := range ex.Relationships {
			if r.Relation == offline.RelFailure {
				fails = append(fails, r)
			}
		}
		require.Len(t, fails, 1, "one primary failure mode for %s", ex.DocID)
		require.Equal(t, ex.TextUnits[0].ID, fails[0].TextUnit)
		require.Contains(t, ex.TextUnits[0].Text, fails[0].Description)
	}

	// EXPECTED.md's edit: INC-121 now blames a bad upgrade.
	rev := seedDoc(t, "acme", "INC-121", 2)
	rev.Text = strings.Replace(rev.Text, "after an upgrade, certmanager stopped", "a bad upgrade of certmanager stopped", 1)
	require.Contains(t, rev.Text, "bad upgrade")
	publishDoc(t, bus, rev)
	got = waitExtracted(t, bus, "acme", len(seedIDs)+1)
	after := aggregate(got)
	require.Equal(t, "2[INC-101 INC-112]", after["expired certificate"])
	require.Equal(t, "1[INC-121]", after["bad upgrade"])
}

// offlineSeed runs the offline extractor over the seed documents.
func offlineSeed(t *testing.T, cfg offline.Config) map[string][]events.RawRelationship {
	t.Helper()
	x, err := offline.New(cfg)
	require.NoError(t, err)
	c, err := chunk.New(tok(t), chunk.DefaultTokens, chunk.DefaultOverlap)
	require.NoError(t, err)
	out := map[string][]events.RawRelationship{}
	for _, id := range seedIDs {
		d := seedDoc(t, "acme", id, 1)
		_, rels, err := x.Extract(t.Context(), d, c.Chunk(d.DocID, d.Version, d.Text))
		require.NoError(t, err)
		out[id] = rels
	}
	return out
}

func TestOfflinePrecisionRecallAgainstRecording(t *testing.T) {
	gold, err := eval.LoadGold(filepath.Join(seed, "recorded-llm-extraction.json"))
	require.NoError(t, err)
	rels := gold.Relations()
	require.Equal(t, []string{"affected", "failure", "involved"}, rels)

	for _, tc := range []struct {
		name                  string
		g                     offline.Gazetteer
		minP, minR, minFailPR float64
	}{
		// The catalog alone: services and teams are known, components are
		// found by their shape.
		{"catalog", catalogGazetteer(t), 0.9, 0.75, 1},
		// Plus the components an earlier document or import introduced.
		{"catalog+components", seedGazetteer(t), 0.9, 0.85, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := offlineSeed(t, offline.Config{Gazetteer: tc.g})
			all := eval.ScoreTriples(gold, got, rels)
			t.Logf("offline vs recorded LLM (%s), relations %v: precision %.3f recall %.3f F1 %.3f (tp %d fp %d fn %d)",
				tc.name, rels, all.Precision(), all.Recall(), all.F1(), all.TP, all.FP, all.FN)
			for _, m := range all.Missed {
				t.Logf("missed   %s", m)
			}
			for _, s := range all.Spurious {
				t.Logf("spurious %s", s)
			}
			for _, rel := range rels {
				s := eval.ScoreTriples(gold, got, []string{rel})
				t.Logf("  %-9s precision %.3f recall %.3f (tp %d fp %d fn %d)", rel, s.Precision(), s.Recall(), s.TP, s.FP, s.FN)
			}
			require.GreaterOrEqual(t, all.Precision(), tc.minP)
			require.GreaterOrEqual(t, all.Recall(), tc.minR)
			fail := eval.ScoreTriples(gold, got, []string{"failure"})
			require.Equal(t, tc.minFailPR, fail.Precision())
			require.Equal(t, tc.minFailPR, fail.Recall())
			aff := eval.ScoreTriples(gold, got, []string{"affected"})
			require.Equal(t, 1.0, aff.Precision())
			require.Equal(t, 1.0, aff.Recall())
		})
	}
}

// TestOfflineBridgeQuestionFindsEveryTeam asks EXPECTED.md's bridge
// question of the offline extraction, with only the seed catalog (which
// does not name cert-manager) and the bundled gazetteer: incidents
// involving cert-manager, the services they affected, the teams owning
// those. Every spelling (cert-manager, Cert Manager, certmanager) is found
// without another document having named it first.
func TestOfflineBridgeQuestionFindsEveryTeam(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(seed, "catalog-info.yaml"))
	require.NoError(t, err)
	st, _, err := catalog.Parse(data)
	require.NoError(t, err)
	var g offline.StaticGazetteer
	for _, e := range st.Entities {
		id := resolve.ID(e.Type, e.Key)
		require.NotEqual(t, "component:certmanager", id, "the catalog does not name cert-manager")
		g = append(g, offline.CatalogEntry(id, e.Type, e.Name, resolve.Key(e.Key)))
	}
	owner := map[string]string{}
	for _, r := range st.Relationships {
		if r.Relation == "owned_by" {
			owner[resolve.ID(r.SourceType, r.Source)] = resolve.ID(r.TargetType, r.Target)
		}
	}
	x, err := offline.New(offline.Config{Gazetteer: g})
	require.NoError(t, err)
	c, err := chunk.New(tok(t), chunk.DefaultTokens, chunk.DefaultOverlap)
	require.NoError(t, err)
	var incidents, teams []string
	for _, id := range seedIDs {
		doc := seedDoc(t, "acme", id, 1)
		_, rels, err := x.Extract(t.Context(), doc, c.Chunk(doc.DocID, doc.Version, doc.Text))
		require.NoError(t, err)
		involved := false
		var affected []string
		for _, r := range rels {
			target := resolve.ID(r.TargetType, r.Target)
			switch {
			case r.Relation == "involved" && target == "component:certmanager":
				involved = true
			case r.Relation == "affected":
				affected = append(affected, target)
			}
		}
		if !involved {
			continue
		}
		incidents = append(incidents, id)
		for _, s := range affected {
			if tm, ok := owner[s]; ok && !slices.Contains(teams, tm) {
				teams = append(teams, tm)
			}
		}
	}
	slices.Sort(teams)
	require.Equal(t, []string{"INC-101", "INC-112", "INC-121"}, incidents)
	require.Equal(t, []string{"team:discovery", "team:identity", "team:messaging", "team:payments"}, teams, "4 of 4 teams")
}
