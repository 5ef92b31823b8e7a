package extractor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/services/extractor/chunk"
	"github.com/kgstream/kgstream/services/extractor/internal/metrics"
	"github.com/kgstream/kgstream/services/extractor/offline"
)

// CatalogDocType is the doc type of a service catalog document.
const CatalogDocType = "catalog"

// CatalogSource is the source system the gateway's catalog import records
// in the registry: a deleted catalog keeps no doc type in the graph store,
// its registry entry still says where it came from.
const CatalogSource = "backstage"

// Re-extraction reasons (the reason label of kgstream_reextractions_total).
const (
	// ReasonCatalog: the offline extraction of a document changed with the
	// catalog.
	ReasonCatalog = "catalog"
	// ReasonCatalogReresolve: an LLM extraction republished unchanged for
	// re-resolution against the new catalog.
	ReasonCatalogReresolve = "catalog_reresolve"
	// ReasonCatalogInFlight: a document extracted before a catalog change
	// and applied after it.
	ReasonCatalogInFlight = "catalog_in_flight"
)

// ReextractStore is what re-extraction reads: the registry's listing of a
// tenant's documents and the graph store's source records (text units,
// stored extraction) and catalog entities.
type ReextractStore interface {
	store.GraphStore
	ListSources(ctx context.Context, tenant string) ([]provenance.SourceState, error)
	Sources(ctx context.Context, tenant string, docIDs []string) (map[string]provenance.SourceState, error)
}

// ReextractConfig configures the catalog re-extraction stage.
type ReextractConfig struct {
	// Stage names the consumer, its metrics and its dead-letter subject
	// (default "extractor-catalog").
	Stage string
	// MaxDeliver, Backoff and AckWait as in Config.
	MaxDeliver int
	Backoff    []time.Duration
	AckWait    time.Duration
	// Concurrency bounds the documents re-extracted at once (default 4).
	Concurrency int
}

// Reextractor keeps extraction a function of the catalog rather than of
// history: when the resolver has applied a catalog document, it
// re-extracts, from their stored text units, the documents of the tenant
// whose text names (or whose extraction linked) a catalog entity of that
// document, and publishes each changed extraction as the same version
// with the next extraction number (events.Extracted.Resolution), which the
// resolver re-applies under a resolution number of its own.
//
// With the offline extractor the stored units go through the same stages
// as a fresh extraction, so the result is what ingesting the document
// after the catalog would give. With any other extractor (the LLM one)
// nothing is extracted again: the stored extraction is republished for
// re-resolution against the new catalog, since a model call is neither
// free nor reproducible.
type Reextractor struct {
	cfg   ReextractConfig
	bus   *stream.Bus
	st    ReextractStore
	ext   Extractor
	off   *offline.Extractor // nil unless ext is the offline extractor
	log   *slog.Logger
	count *prometheus.CounterVec

	mu sync.Mutex
	// pending is the last re-extraction published per tenant/doc/version
	// that the resolver may not have applied yet.
	pending map[string]pendingExtraction
	// catalogAt is when each tenant's catalog change was last handled.
	catalogAt map[string]time.Time
	now       func() time.Time
}

type pendingExtraction struct {
	resolution int64
	hash       string
}

// NewReextractor returns the stage over st, publishing on bus what ext
// extracts again.
func NewReextractor(cfg ReextractConfig, bus *stream.Bus, st ReextractStore, ext Extractor, log *slog.Logger, reg prometheus.Registerer) (*Reextractor, error) {
	if cfg.Stage == "" {
		cfg.Stage = "extractor-catalog"
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 4
	}
	if cfg.MaxDeliver < 0 {
		return nil, fmt.Errorf("extractor: MaxDeliver %d must be >= 0", cfg.MaxDeliver)
	}
	if bus == nil || st == nil || ext == nil {
		return nil, errors.New("extractor: NewReextractor needs a bus, a store and an extractor")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Reextractor{cfg: cfg, bus: bus, st: st, ext: ext, log: log.With("stage", cfg.Stage),
		pending: map[string]pendingExtraction{}, catalogAt: map[string]time.Time{}, now: time.Now,
		count: metrics.Counter(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgstream_reextractions_total",
			Help: "Extractions published again for an applied version after a catalog change, by reason.",
		}, []string{"reason"})),
	}
	r.off, _ = ext.(*offline.Extractor)
	for _, reason := range []string{ReasonCatalog, ReasonCatalogReresolve, ReasonCatalogInFlight} {
		r.count.WithLabelValues(reason)
	}
	return r, nil
}

// Reextractions is the counter of published re-extractions.
func (r *Reextractor) Reextractions() *prometheus.CounterVec { return r.count }

// ConsumerConfig is the stage's consumer of kg.graph.changed.
func (r *Reextractor) ConsumerConfig() stream.ConsumerConfig {
	return stream.ConsumerConfig{Stage: r.cfg.Stage, Kinds: []events.Kind{events.KindGraphChanged},
		MaxDeliver: r.cfg.MaxDeliver, Backoff: r.cfg.Backoff, AckWait: r.cfg.AckWait}
}

// Run consumes kg.graph.changed until ctx is cancelled.
func (r *Reextractor) Run(ctx context.Context) error {
	if err := r.bus.Run(ctx, r.ConsumerConfig(), r.Handle); err != nil {
		return fmt.Errorf("running stage %s: %w", r.cfg.Stage, err)
	}
	return nil
}

// Handle processes one kg.graph.changed message: a catalog document's
// change re-extracts the documents it can affect; another document's
// apply is checked only when it was received before the tenant's last
// catalog change (extracted, maybe, with the catalog before).
// The event is decoded and its tenant checked against the subject by
// stream.Typed.
func (r *Reextractor) Handle(ctx context.Context, m *stream.Message) error {
	return stream.Typed(r.handle)(ctx, m)
}

func (r *Reextractor) handle(ctx context.Context, _ *stream.Message, evp *events.GraphChanged) error {
	ev := *evp
	if !ev.Deleted && ev.DocType != "" && ev.DocType != CatalogDocType && !r.caughtByCatalog(ev) {
		// Neither a catalog document nor one extracted before the
		// tenant's last catalog change: its record is not read.
		return nil
	}
	rec, err := r.st.Source(ctx, ev.Tenant, ev.DocID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("reading source %s: %w", ev.DocID, err)
	}
	isCatalog, err := r.isCatalog(ctx, ev.Tenant, rec)
	if err != nil {
		return err
	}
	if !isCatalog {
		return r.inFlight(ctx, ev, rec)
	}
	ids, err := r.catalogIDs(ctx, ev)
	if err != nil {
		return err
	}
	return r.CatalogChanged(ctx, ev.Tenant, ids)
}

// isCatalog reports whether rec is a catalog document (a deleted one: by
// its registry source).
func (r *Reextractor) isCatalog(ctx context.Context, tenant string, rec store.SourceRecord) (bool, error) {
	if !rec.Deleted {
		return rec.DocType == CatalogDocType, nil
	}
	srcs, err := r.st.Sources(ctx, tenant, []string{rec.DocID})
	if err != nil {
		return false, fmt.Errorf("reading the registry entry of %s: %w", rec.DocID, err)
	}
	return srcs[rec.DocID].Source == CatalogSource, nil
}

// catalogIDs are the entities of catalog types a catalog event names; for
// an event that does not name every entity its change altered (a
// redelivered change, whose event names only what the applied version
// contributes, or an older build's), every entity of a catalog type the
// tenant has: an entity the catalog dropped lives on through the
// documents that cite it, which must be extracted again.
func (r *Reextractor) catalogIDs(ctx context.Context, ev events.GraphChanged) ([]string, error) {
	types := map[string]bool{}
	for _, t := range offline.CatalogTypes() {
		types[t] = true
	}
	var out []string
	for _, id := range append(slices.Clone(ev.Touched), ev.Contributed...) {
		if t, _ := resolve.SplitID(id); types[t] {
			out = append(out, id)
		}
	}
	if !ev.NamesAll() {
		for _, t := range offline.CatalogTypes() {
			es, err := r.st.EntitiesByType(ctx, ev.Tenant, t)
			if err != nil {
				return nil, fmt.Errorf("listing the %s entities of tenant %s: %w", t, ev.Tenant, err)
			}
			for _, e := range es {
				out = append(out, e.ID)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// CatalogChanged re-extracts the tenant's documents that the catalog
// entities ids can affect, after the catalog's change was applied.
func (r *Reextractor) CatalogChanged(ctx context.Context, tenant string, ids []string) error {
	r.mu.Lock()
	r.catalogAt[tenant] = r.now()
	r.mu.Unlock()
	if r.off != nil {
		r.off.InvalidateCatalog(tenant)
	}
	if len(ids) == 0 {
		return nil
	}
	cands, err := r.Candidates(ctx, tenant, ids)
	if err != nil {
		return err
	}
	reason := ReasonCatalog
	if r.off == nil {
		reason = ReasonCatalogReresolve
	}
	published, err := r.each(ctx, cands, func(rec store.SourceRecord) (bool, error) {
		return r.Reextract(ctx, tenant, rec, reason)
	})
	r.log.Info("catalog change re-extracted", "tenant", tenant, "entities", len(ids), "candidates", len(cands),
		"published", published, "error", err)
	return err
}

// each runs f over recs, Concurrency at a time, and returns how many
// returned true and the first error.
func (r *Reextractor) each(ctx context.Context, recs []store.SourceRecord, f func(store.SourceRecord) (bool, error)) (int, error) {
	var (
		mu    sync.Mutex
		n     int
		first error
		wg    sync.WaitGroup
	)
	sem := make(chan struct{}, r.cfg.Concurrency)
	for _, rec := range recs {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			ok, err := f(rec)
			mu.Lock()
			defer mu.Unlock()
			if ok {
				n++
			}
			if err != nil && first == nil {
				first = err
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return n, first
}

// Candidates returns the live, applied, non-catalog documents of the
// tenant that the catalog entities ids can affect, sorted by doc id: those
// whose stored extraction linked one of them, and those whose stored text
// names one of them (by a catalog name or alias, its key, or a spelling of
// a bundled entity the catalog name displaces).
func (r *Reextractor) Candidates(ctx context.Context, tenant string, ids []string) ([]store.SourceRecord, error) {
	names, err := offline.CandidateNames(ctx, r.off, tenant, ids)
	if err != nil {
		return nil, err
	}
	srcs, err := r.st.ListSources(ctx, tenant)
	if err != nil {
		return nil, fmt.Errorf("listing the documents of tenant %s: %w", tenant, err)
	}
	var out []store.SourceRecord
	for _, s := range srcs {
		if s.Deleted {
			continue
		}
		rec, err := r.st.Source(ctx, tenant, s.DocID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			continue // not applied yet: it is extracted with the new catalog
		case err != nil:
			return nil, fmt.Errorf("reading source %s: %w", s.DocID, err)
		}
		if rec.Deleted || rec.DocType == CatalogDocType || len(rec.TextUnits) == 0 {
			continue
		}
		if linksAny(rec.Entities, ids) || names.In(rec.TextUnits) {
			out = append(out, rec)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].DocID < out[j].DocID })
	return out, nil
}

func linksAny(entities, ids []string) bool {
	for _, id := range ids {
		if _, ok := slices.BinarySearch(entities, id); ok {
			return true
		}
	}
	return false
}

// inFlight re-checks a document applied after the tenant's last catalog
// change but received before it: its extraction may have read the catalog
// before the change, and the catalog's candidates were listed before it
// was applied. Only the offline extraction is checked.
func (r *Reextractor) inFlight(ctx context.Context, ev events.GraphChanged, rec store.SourceRecord) error {
	if ev.Deleted || rec.Deleted || rec.Version != ev.Version || len(rec.TextUnits) == 0 || !r.caughtByCatalog(ev) {
		return nil
	}
	_, err := r.Reextract(ctx, ev.Tenant, rec, ReasonCatalogInFlight)
	return err
}

// caughtByCatalog reports whether the document of ev may have been
// extracted against an older catalog: received before the tenant's last
// catalog change, with the offline extractor.
func (r *Reextractor) caughtByCatalog(ev events.GraphChanged) bool {
	if r.off == nil {
		return false
	}
	r.mu.Lock()
	at, ok := r.catalogAt[ev.Tenant]
	r.mu.Unlock()
	return ok && ev.ReceivedAt.Before(at)
}

// Reextract extracts rec's document again from its stored text units
// (the offline extractor) and publishes the result with the next
// extraction number when it differs from what is applied or already on its way;
// with another extractor it republishes the stored extraction for
// re-resolution. It reports whether it published.
func (r *Reextractor) Reextract(ctx context.Context, tenant string, rec store.SourceRecord, reason string) (bool, error) {
	if len(rec.Raw) == 0 {
		r.log.Warn("no stored extraction to re-extract; re-ingest the document", "tenant", tenant, "doc", rec.DocID)
		return false, nil
	}
	var old events.Extracted
	if err := events.Decode(rec.Raw, &old); err != nil {
		r.log.Error("stored extraction does not decode", "tenant", tenant, "doc", rec.DocID, "error", err)
		return false, nil
	}
	if old.Extractor == "structured" {
		return false, nil // a structured document's graph does not depend on the catalog
	}
	out := old
	if r.off != nil {
		ents, rels, err := r.extract(ctx, tenant, rec)
		if err != nil {
			return false, err
		}
		out.Extractor, out.Entities, out.Relationships = r.off.Name(), ents, rels
	}
	hash, err := extractionHash(&out)
	if err != nil {
		return false, err
	}
	oldHash, err := extractionHash(&old)
	if err != nil {
		return false, err
	}
	// Extractions of a version are numbered by the extractor alone (the
	// resolver numbers resolutions, from its stored state): the next
	// number after the applied extraction's, or after one on its way.
	key := events.MsgID(tenant, rec.DocID, rec.Version, "")
	r.mu.Lock()
	p, pending := r.pending[key]
	if pending && p.resolution <= old.Resolution {
		delete(r.pending, key) // applied
		pending = false
	}
	r.mu.Unlock()
	target := oldHash
	if pending {
		target = p.hash
	}
	if r.off != nil && hash == target {
		return false, nil
	}
	res := old.Resolution + 1
	if pending {
		res = p.resolution + 1
	}
	out.Resolution, out.ReceivedAt = res, r.now().UTC()
	msgID := events.ExtractedID(tenant, rec.DocID, rec.Version, res)
	if _, err := r.bus.Publish(ctx, events.KindExtracted, tenant, msgID, &out); err != nil {
		return false, fmt.Errorf("publishing the re-extraction of %s version %d: %w", rec.DocID, rec.Version, err)
	}
	r.mu.Lock()
	if cur, ok := r.pending[key]; !ok || cur.resolution < res {
		r.pending[key] = pendingExtraction{resolution: res, hash: hash}
	}
	r.mu.Unlock()
	r.count.WithLabelValues(reason).Inc()
	r.log.Info("document re-extracted", "tenant", tenant, "doc", rec.DocID, "version", rec.Version,
		"resolution", res, "reason", reason, "entities", len(out.Entities), "relationships", len(out.Relationships))
	return true, nil
}

// extract runs the offline extractor over rec's stored text units with
// the document as the extractor first saw it (its text rebuilt from the
// units), as Worker.Handle does.
func (r *Reextractor) extract(ctx context.Context, tenant string, rec store.SourceRecord) ([]events.RawEntity, []events.RawRelationship, error) {
	doc := &events.DocChanged{Header: events.Header{Tenant: tenant}, DocID: rec.DocID, Version: rec.Version,
		Title: rec.Title, DocType: rec.DocType, Text: chunk.UnitsText(rec.TextUnits), ReceivedAt: rec.ReceivedAt}
	ents, rels, err := r.off.Extract(ctx, doc, rec.TextUnits)
	if err != nil {
		return nil, nil, fmt.Errorf("re-extracting %s version %d: %w", rec.DocID, rec.Version, err)
	}
	if ents == nil {
		ents = []events.RawEntity{}
	}
	kept, _ := connected(ents, rels)
	return ents, kept, nil
}

// extractionHash fingerprints what the resolver resolves: text units,
// entities and relationships.
func extractionHash(ev *events.Extracted) (string, error) {
	data, err := json.Marshal(struct {
		Extractor     string                   `json:"x"`
		TextUnits     []events.TextUnit        `json:"u"`
		Entities      []events.RawEntity       `json:"e"`
		Relationships []events.RawRelationship `json:"r"`
	}{ev.Extractor, nonNil(ev.TextUnits), nonNil(ev.Entities), nonNil(ev.Relationships)})
	if err != nil {
		return "", fmt.Errorf("encoding an extraction: %w", err)
	}
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:]), nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
