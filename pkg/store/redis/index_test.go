package redis_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/store/redis"
)

// indexRecorder is a client hook keeping the SADD and SREM commands sent
// on the index sets under base (entity, type, name and relation sets), as "SADD <key after base> <members, sorted>", the HSET and HDEL
// commands on the adjacency hashes, as "HSET <key after base> <fields,
// sorted>", the changes of the edge count, as "INCRBY edge-count <n>",
// and the deletions of keys of supports stored apart, as "DEL <key after
// base>".
type indexRecorder struct {
	base string
	mu   sync.Mutex
	cmds []string
}

// recordedStore is a store under a fresh prefix (see freshStore) whose
// client records, in rec, the index commands on tenant's graph keys (rec.base
// is the prefix of those keys).
func recordedStore(t *testing.T, tenant string) (*redis.Store, *goredis.Client, *indexRecorder) {
	c := newClient(t)
	prefix := "kgtest-" + rand.Text()[:12]
	rec := &indexRecorder{base: prefix + ":{" + tenant + "}:g:"}
	c.AddHook(rec)
	return storeOn(t, c, prefix), c, rec
}

func (r *indexRecorder) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (r *indexRecorder) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		r.record(cmd)
		return next(ctx, cmd)
	}
}

func (r *indexRecorder) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		for _, cmd := range cmds {
			r.record(cmd)
		}
		return next(ctx, cmds)
	}
}

func (r *indexRecorder) record(cmd goredis.Cmder) {
	name := strings.ToUpper(cmd.Name())
	args := cmd.Args()
	if name == "DEL" {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, a := range args[1:] {
			if rest, ok := strings.CutPrefix(fmt.Sprint(a), r.base); ok && strings.HasPrefix(rest, "xs:") {
				r.cmds = append(r.cmds, "DEL "+rest)
			}
		}
		return
	}
	if len(args) < 3 {
		return
	}
	key, _ := args[1].(string)
	rest, ok := strings.CutPrefix(key, r.base)
	if !ok {
		return
	}
	kinds := []string{"ents", "type:", "name:", "rel:"}
	step := 1 // SADD, SREM, HDEL: every argument is a member or field
	switch name {
	case "SADD", "SREM":
	case "INCRBY":
		kinds = []string{"edge-count"}
	case "HSET":
		kinds, step = []string{"out:", "in:", "name:"}, 2 // fields and values
	case "HDEL":
		kinds = []string{"out:", "in:", "name:"}
	default:
		return
	}
	if !slices.ContainsFunc(kinds, func(kind string) bool { return strings.HasPrefix(rest, kind) }) {
		return
	}
	members := make([]string, 0, len(args)-2)
	for i := 2; i < len(args); i += step {
		members = append(members, fmt.Sprint(args[i]))
	}
	slices.Sort(members)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cmds = append(r.cmds, name+" "+rest+" "+strings.Join(members, ","))
}

// take returns the commands recorded since the last call, sorted.
func (r *indexRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.cmds
	r.cmds = nil
	slices.Sort(out)
	return out
}

// TestApplyWritesChangedIndexEntriesOnly checks that an apply writes the
// index entries of what it changes and no others: an edit restating the
// same entities and edges (the usual edit: new descriptions, weights,
// text units, so new fragments and heads) writes none; a new spelling
// moves the entity between name sets only; a type change moves it between
// type sets only. The indexes then still answer every query and the audit
// finds nothing.
func TestApplyWritesChangedIndexEntriesOnly(t *testing.T) {
	ctx := t.Context()
	const tenant = "acme"
	s, _, rec := recordedStore(t, tenant)
	doc := func(v int, alphaName, betaType string) store.Contributions {
		return store.Contributions{
			TextUnits: []events.TextUnit{{ID: fmt.Sprintf("u%d", v), Text: "text"}},
			Entities: []store.EntityContribution{
				{ID: "alpha", Type: "service", Name: alphaName, NameRank: 1, Description: fmt.Sprintf("alpha, version %d", v), TextUnits: []string{fmt.Sprintf("u%d", v)}},
				{ID: "beta", Type: betaType, Name: "Beta", NameRank: 1, Description: fmt.Sprintf("beta, version %d", v)},
			},
			Edges: []store.EdgeContribution{{Source: "alpha", Relation: "uses", Target: "beta", Weight: float64(v),
				Description: fmt.Sprintf("version %d", v), TextUnits: []string{fmt.Sprintf("u%d", v)}}},
		}
	}
	apply := func(v int, alphaName, betaType string) {
		t.Helper()
		res, err := s.Apply(ctx, tenant, "doc", int64(v), doc(v, alphaName, betaType))
		require.NoError(t, err)
		require.Equal(t, store.Applied, res.Outcome)
	}
	edge := store.EdgeID("alpha", "uses", "beta")

	apply(1, "Alpha", "team")
	require.Equal(t, []string{
		"HSET in:beta alpha|uses",
		"HSET name:alpha alpha",
		"HSET name:beta beta",
		"HSET out:alpha uses|beta",
		"INCRBY edge-count 1",
		"SADD ents alpha,beta",
		"SADD rel:uses " + edge,
		"SADD type:service alpha",
		"SADD type:team beta",
	}, rec.take(), "the first apply")

	apply(2, "Alpha", "team")
	require.Empty(t, rec.take(), "an edit restating the same entities and edge")

	apply(3, "Alpha Prime", "team")
	require.Equal(t, []string{"HDEL name:alpha alpha", "HSET name:alpha prime alpha"}, rec.take(), "an edit respelling alpha")

	// Another document's spelling of alpha, of a lower rank: the display
	// name stays, the tally gains a spelling.
	alfa := store.Contributions{
		TextUnits: []events.TextUnit{{ID: "u", Text: "text"}},
		Entities:  []store.EntityContribution{{ID: "alpha", Type: "service", Name: "Alfa", NameRank: 2, TextUnits: []string{"u"}}},
	}
	_, err := s.Apply(ctx, tenant, "other", 1, alfa)
	require.NoError(t, err)
	require.Equal(t, []string{"HSET name:alfa alpha"}, rec.take(), "another document's spelling")
	alfa.Entities[0].Description = "edited"
	_, err = s.Apply(ctx, tenant, "other", 2, alfa)
	require.NoError(t, err)
	require.Empty(t, rec.take(), "an edit of the other document")
	_, err = s.Delete(ctx, tenant, "other", 3)
	require.NoError(t, err)
	require.Equal(t, []string{"HDEL name:alfa alpha"}, rec.take(), "the other document's deletion")

	apply(4, "Alpha Prime", "service")
	require.Equal(t, []string{"SADD type:service beta", "SREM type:team beta"}, rec.take(), "an edit changing beta's type")

	byType, err := s.EntitiesByType(ctx, tenant, "service")
	require.NoError(t, err)
	require.Len(t, byType, 2)
	named, err := s.EntitiesByName(ctx, tenant, "alpha prime")
	require.NoError(t, err)
	require.Len(t, named, 1)
	named, err = s.EntitiesByName(ctx, tenant, "alpha")
	require.NoError(t, err)
	require.Empty(t, named)
	out, err := s.Edges(ctx, tenant, "alpha", store.Out)
	require.NoError(t, err)
	require.Len(t, out, 1)
	require.Equal(t, 4.0, out[0].Supports[0].Weight)
	rep, err := s.Audit(ctx, tenant)
	require.NoError(t, err)
	require.Zero(t, rep.IndexMismatches, "%q", rep.Problems)

	_, err = s.Delete(ctx, tenant, "doc", 5)
	require.NoError(t, err)
	require.Equal(t, []string{
		"HDEL in:beta alpha|uses",
		"HDEL name:alpha prime alpha",
		"HDEL name:beta beta",
		"HDEL out:alpha uses|beta",
		"INCRBY edge-count -1",
		"SREM ents alpha,beta",
		"SREM rel:uses " + edge,
		"SREM type:service alpha,beta",
	}, rec.take(), "the deletion")
}

// TestRemovedEdgeDeletesSupportsKeyOnlyWhenSpilled checks that removing
// an edge deletes the key of its supports stored apart only when its head
// has spilled them: an edge whose supports are inline has no such key.
func TestRemovedEdgeDeletesSupportsKeyOnlyWhenSpilled(t *testing.T) {
	ctx := t.Context()
	const tenant = "acme"
	s, c, rec := recordedStore(t, tenant)
	stating := func(source, target string) store.Contributions {
		return store.Contributions{
			TextUnits: []events.TextUnit{{ID: "u", Text: "text"}},
			Entities: []store.EntityContribution{
				{ID: source, Type: "service", Name: source, TextUnits: []string{"u"}},
				{ID: target, Type: "service", Name: target, TextUnits: []string{"u"}},
			},
			Edges: []store.EdgeContribution{{Source: source, Relation: "uses", Target: target, Weight: 1, TextUnits: []string{"u"}}},
		}
	}
	dels := func() []string {
		return slices.DeleteFunc(rec.take(), func(c string) bool { return !strings.HasPrefix(c, "DEL ") })
	}
	_, err := s.Apply(ctx, tenant, "lone", 1, stating("c", "d"))
	require.NoError(t, err)
	docs := store.MaxInlineSupports + 1 // one more than a head holds: spilled
	for i := range docs {
		_, err := s.Apply(ctx, tenant, fmt.Sprintf("doc-%d", i), 1, stating("a", "b"))
		require.NoError(t, err)
	}
	rec.take()

	_, err = s.Delete(ctx, tenant, "lone", 2)
	require.NoError(t, err)
	require.Empty(t, dels(), "removing an edge with one inline support")
	for i := range docs {
		_, err := s.Delete(ctx, tenant, fmt.Sprintf("doc-%d", i), 2)
		require.NoError(t, err)
		if i < docs-1 {
			require.Empty(t, dels(), "retracting support %d of a spilled edge", i)
		}
	}
	require.Equal(t, []string{"DEL xs:" + store.EdgeID("a", "uses", "b")}, dels(), "removing the spilled edge")
	rep, err := s.Audit(ctx, tenant)
	require.NoError(t, err)
	require.Equal(t, store.AuditReport{}, rep)
	n, err := c.Exists(ctx, rec.base+"xs:"+store.EdgeID("a", "uses", "b")).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the spilled edge's supports key is left")
}
