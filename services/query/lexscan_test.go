package query

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// The full scan the unit index replaced, kept as its oracle:
// scanReadableDocs lists and admits every source through the Admitter,
// scanUnitRanking weighs the question's words over every readable unit
// and title, and scanRank scores every readable unit.

func (c *unitCache) get(tenant, doc string) *lexDoc {
	return c.tenant(tenant).lookup([]string{doc})[0]
}

func (c *unitCache) put(tenant, doc string, d *lexDoc) {
	t := c.tenant(tenant)
	if d == nil {
		t.drop([]string{doc})
		return
	}
	t.put(doc, d)
}

func (v *view) scanReadableDocs() ([]readableDoc, error) {
	if v.docsLoaded {
		return v.docs, nil
	}
	states, err := v.s.st.ListSources(v.ctx, v.tenant)
	if err != nil {
		return nil, fmt.Errorf("%w: listing sources: %w", errAdmissionUnavailable, err)
	}
	ids := make([]string, 0, len(states))
	for _, st := range states {
		if !st.Deleted {
			ids = append(ids, st.DocID)
		}
	}
	// The listing is the request's registry snapshot, as readableDocs
	// makes it.
	v.regChecked, v.reg = true, newRegView(0, states)
	if err := v.adm.Prefetch(ids); err != nil {
		return nil, err
	}
	var out []readableDoc
	for _, st := range states {
		if st.Deleted {
			v.s.units.put(v.tenant, st.DocID, nil)
			continue
		}
		ok, err := v.adm.Direct(st.DocID)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		d := v.s.units.get(v.tenant, st.DocID)
		if d == nil || d.version != st.Version {
			rec, err := v.s.st.Source(v.ctx, v.tenant, st.DocID)
			switch {
			case errors.Is(err, store.ErrNotFound):
				continue
			case err != nil:
				return nil, fmt.Errorf("reading source %q: %w", st.DocID, err)
			}
			if rec.Deleted || rec.Version != st.Version {
				continue
			}
			d = newLexDoc(rec, st.Title)
			v.s.units.put(v.tenant, st.DocID, d)
		}
		title := d.title
		if title == "" {
			title = st.Title
		}
		out = append(out, readableDoc{id: st.DocID, title: title, doc: d})
	}
	v.docs, v.docsLoaded = out, true
	return out, nil
}

func scanUnitRanking(question string, docs []readableDoc) unitRanking {
	r := unitRanking{words: contentWords(question), unitIDF: map[string]float64{}, titleIDF: map[string]float64{}}
	units := 0
	udf, tdf := map[string]int{}, map[string]int{}
	for _, d := range docs {
		for _, w := range r.words {
			if d.doc.titleWords.has(w) {
				tdf[w]++
			}
		}
		for _, u := range d.doc.units {
			units++
			for _, w := range r.words {
				if u.words.has(w) {
					udf[w]++
				}
			}
		}
	}
	for _, w := range r.words {
		if n := udf[w]; n > 0 {
			r.unitIDF[w] = math.Log(1 + float64(units)/float64(n))
			r.unitSum += r.unitIDF[w]
		}
		if n := tdf[w]; n > 0 {
			r.titleIDF[w] = math.Log(1 + float64(len(docs))/float64(n))
			r.titleSum += r.titleIDF[w]
		}
	}
	return r
}

func (r unitRanking) scanRank(docs []readableDoc, priors map[string]float64, limit int) []rankedUnit {
	var out []rankedUnit
	for _, d := range docs {
		ts := r.titleShare(d.doc)
		for _, u := range d.doc.units {
			s := r.share(u.words.has)
			p := priors[u.docID+"#"+u.unit]
			if s < minUnitShare && p == 0 && ts < 0.5 {
				continue
			}
			out = append(out, rankedUnit{lexUnit: u, title: d.title, titleShare: ts,
				score: s + titleWeight*ts*ts + priorWeight*p})
		}
	}
	slices.SortFunc(out, func(a, b rankedUnit) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.docID, b.docID), cmp.Compare(a.unit, b.unit))
	})
	perDoc := map[string]int{}
	kept := out[:0]
	for _, u := range out {
		if len(kept) == limit {
			break
		}
		if perDoc[u.docID] == maxUnitsPerDoc {
			continue
		}
		perDoc[u.docID]++
		kept = append(kept, u)
	}
	return kept
}

// RankedUnitsOf is one ranking's result: the question's word weights and
// the ranked units.
type RankedUnitsOf struct {
	Ranking any
	Units   any
	Docs    int
}

// RankBothWays ranks the units of caller's readable documents against
// question twice, each in its own request view: through the unit index,
// and by the full scan it replaced.
func RankBothWays(ctx context.Context, s *Service, caller provenance.Caller, question string, priors map[string]float64, limit int) (indexed, scanned RankedUnitsOf, err error) {
	v := newView(ctx, s, caller)
	r, err := v.unitRanking(question)
	if err != nil {
		return indexed, scanned, err
	}
	top, err := v.rankUnits(r, priors, limit)
	if err != nil {
		return indexed, scanned, err
	}
	indexed = RankedUnitsOf{Ranking: r, Units: plainUnits(top), Docs: len(v.docs)}
	w := newView(ctx, s, caller)
	docs, err := w.scanReadableDocs()
	if err != nil {
		return indexed, scanned, err
	}
	sr := scanUnitRanking(question, docs)
	scanned = RankedUnitsOf{Ranking: sr, Units: plainUnits(sr.scanRank(docs, priors, limit)), Docs: len(docs)}
	return indexed, scanned, nil
}

// RankAcrossChange loads caller's readable documents in one request view
// and resolves them against the unit index, runs change (which may edit, delete or re-permission documents and make
// other requests replace cached versions), then ranks that view's
// documents through the index and by the full scan.
func RankAcrossChange(ctx context.Context, s *Service, caller provenance.Caller, question string, change func() error) (indexed, scanned RankedUnitsOf, err error) {
	v := newView(ctx, s, caller)
	docs, err := v.readableDocs()
	if err != nil {
		return indexed, scanned, err
	}
	before, err := v.unitRanking(question) // resolves the view against the index
	if err != nil {
		return indexed, scanned, err
	}
	if err := change(); err != nil {
		return indexed, scanned, err
	}
	r, err := v.unitRanking(question)
	if err != nil {
		return indexed, scanned, err
	}
	if !reflect.DeepEqual(before, r) {
		return indexed, scanned, fmt.Errorf("weights changed across the change: %v, then %v", before, r)
	}
	top, err := v.rankUnits(r, nil, maxRankedUnits)
	if err != nil {
		return indexed, scanned, err
	}
	sr := scanUnitRanking(question, docs)
	return RankedUnitsOf{Ranking: r, Units: plainUnits(top), Docs: len(docs)},
		RankedUnitsOf{Ranking: sr, Units: plainUnits(sr.scanRank(docs, nil, maxRankedUnits)), Docs: len(docs)}, nil
}

// plainUnit is a ranked unit without its tokens.
type plainUnit struct {
	Doc, Unit, Title, Text string
	Version                int64
	Score, TitleShare      float64
}

func plainUnits(us []rankedUnit) []plainUnit {
	out := make([]plainUnit, 0, len(us))
	for _, u := range us {
		out = append(out, plainUnit{Doc: u.docID, Unit: u.unit, Title: u.title, Text: u.text, Version: u.version,
			Score: u.score, TitleShare: u.titleShare})
	}
	return out
}

// IndexStats reports the tenant's cached versions and live and dead
// postings.
func IndexStats(s *Service, tenant string) (versions, live, dead int) {
	t := s.units.tenant(tenant)
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.docs), t.live, t.dead
}

// RankLocally ranks caller's readable units against question as local
// search does in a new request view (listing and admitting the sources,
// weighing the words, ranking), through the unit index or, with scan,
// by the full scan; it returns how many units were ranked.
func RankLocally(ctx context.Context, s *Service, caller provenance.Caller, question string, scan bool) (int, error) {
	v := newView(ctx, s, caller)
	if scan {
		docs, err := v.scanReadableDocs()
		if err != nil {
			return 0, err
		}
		return len(scanUnitRanking(question, docs).scanRank(docs, nil, maxRankedUnits)), nil
	}
	r, err := v.unitRanking(question)
	if err != nil {
		return 0, err
	}
	top, err := v.rankUnits(r, nil, maxRankedUnits)
	return len(top), err
}

// RankerOf loads caller's readable documents once and returns a ranker
// over them that weighs and ranks a question (through a new resolution
// against the unit index, or with scan by the full scan), leaving the
// listing and admission out of what it measures.
func RankerOf(ctx context.Context, s *Service, caller provenance.Caller) (func(question string, scan bool) int, error) {
	v := newView(ctx, s, caller)
	docs, err := v.readableDocs()
	if err != nil {
		return nil, err
	}
	return func(question string, scan bool) int {
		if scan {
			return len(scanUnitRanking(question, docs).scanRank(docs, nil, maxRankedUnits))
		}
		q := newLexQuery(s.units.tenant(v.tenant), docs)
		return len(q.rank(q.ranking(question), nil, maxRankedUnits))
	}, nil
}
