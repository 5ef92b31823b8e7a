// Package vector defines kgstream's vector index contract: text units,
// entity descriptions and community reports, each with its own vector, the
// documents it was built from and their ACLs, searched by cosine similarity
// within one tenant and only among the items the caller may read.
//
// Adapters live in subpackages named after their technology (embedded,
// weaviate); every adapter must pass the conformance suite in vectortest.
//
// # Access control
//
// An item is built from one or more documents (its Sources), each carrying
// the ACL that document had when the item was written. A caller may read an
// item when EVERY source's ACL admits it: a text unit carries its document's
// ACL; a report or a merged entity description carries one ACL per source
// document and its audience is their intersection. The index evaluates the
// intersection itself because the caller cannot: two group-based ACLs
// ({groups: [sre]} and {groups: [db]}) have no single-ACL intersection
// without knowing who is in both groups.
//
// The ACL is applied BEFORE ranking (pre-filtering): Search ranks only the
// items the Filter admits, so an unreadable item never takes a place among
// the k hits and k readable ones are returned when that many exist.
//
// The index is the first line of admission, not the only one. Its ACL copy
// lags the source registry (UpdateACL runs after the registry recorded a
// revocation), it knows nothing of deletions not yet applied, and it does
// not check that a derived item's source versions are still current. The
// query side therefore re-checks every hit with provenance.Admitter
// (Direct for text units, Derived for reports and merged descriptions)
// before anything enters an answer's context.
//
// An audit (AuditACLs, over ScanSources; package status runs it) counts
// the items whose ACL copy the registry no longer agrees with, and those
// built from documents the registry deleted or never recorded.
package vector

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/kgstream/kgstream/pkg/errkind"
	"github.com/kgstream/kgstream/pkg/provenance"
)

// Sentinel errors callers branch on.
var (
	// ErrInvalid means an argument (tenant, kind, id, vector, source, k) is
	// malformed, or a vector's length differs from the vectors already
	// stored for that tenant and kind. Retrying cannot help.
	ErrInvalid = errkind.New(errkind.Invalid, "invalid argument")
	// ErrClosed means the index was closed.
	ErrClosed = errkind.New(errkind.Unavailable, "index closed")
)

// Limits every adapter enforces, so a caller that works against one works
// against all.
const (
	// MaxK bounds the hits of one Search.
	MaxK = 1000
	// MaxDimensions bounds a vector's length.
	MaxDimensions = 8192
	// MaxIDLen bounds an item id, in bytes.
	MaxIDLen = 512
	// MaxSources bounds the documents one item is built from.
	MaxSources = 10000
)

// Kind is what an item is; each kind is searched separately.
type Kind string

// Item kinds.
const (
	KindTextUnit Kind = "text_unit"
	KindEntity   Kind = "entity"
	KindReport   Kind = "report"
)

// Kinds returns every kind, in a fixed order.
func Kinds() []Kind { return []Kind{KindTextUnit, KindEntity, KindReport} }

// Valid reports whether k is one of Kinds.
func (k Kind) Valid() bool { return slices.Contains(Kinds(), k) }

// Source is one document an item is built from: the version it was built
// from (TextUnit set for a text unit) and the ACL the document had.
type Source struct {
	provenance.SourceRef
	ACL provenance.ACL `json:"acl"`
}

// Item is one searchable vector. An item is identified by its tenant, Kind
// and ID: the same ID under two kinds names two items.
type Item struct {
	ID   string `json:"id"`
	Kind Kind   `json:"kind"`
	// Vector is compared by cosine similarity, so its length does not
	// matter; adapters may store it normalised. It must not be zero, and
	// every vector of one tenant and kind has the same number of
	// dimensions. Hits leave it nil.
	Vector []float32 `json:"-"`
	Text   string    `json:"text"`
	// Sources are the documents the item was built from, one entry per
	// document (at least one). The item is readable by a caller only if
	// every source's ACL admits it.
	Sources  []Source          `json:"sources"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// DocIDs returns the ids of the item's source documents, in order.
func (it Item) DocIDs() []string {
	ids := make([]string, len(it.Sources))
	for i, s := range it.Sources {
		ids[i] = s.DocID
	}
	return ids
}

// Refs returns the item's source refs, in order.
func (it Item) Refs() []provenance.SourceRef {
	refs := make([]provenance.SourceRef, len(it.Sources))
	for i, s := range it.Sources {
		refs[i] = s.SourceRef
	}
	return refs
}

// ReadableBy reports whether every source's ACL admits f. An item without
// sources is readable by nobody.
func (it Item) ReadableBy(f Filter) bool {
	if len(it.Sources) == 0 {
		return false
	}
	for _, s := range it.Sources {
		if !f.Admits(s.ACL) {
			return false
		}
	}
	return true
}

// Filter is who is searching: Search matches only items whose every source
// ACL is public or names the principal or one of the groups. The zero
// Filter matches public items only.
type Filter struct {
	Principal string
	Groups    []string
}

// FilterFor returns the filter of a caller. The tenant is Search's argument.
func FilterFor(c provenance.Caller) Filter {
	return Filter{Principal: c.Principal, Groups: c.Groups}
}

// Admits reports whether acl lets the filter's caller read.
func (f Filter) Admits(acl provenance.ACL) bool {
	return acl.Admits(provenance.Caller{Principal: f.Principal, Groups: f.Groups})
}

// ItemSources is what ScanSources reports of one item: which item it is
// and the sources (document, version, ACL) it holds.
type ItemSources struct {
	Kind    Kind     `json:"kind"`
	ID      string   `json:"id"`
	Sources []Source `json:"sources"`
}

// Hit is one search result: the item (without its vector) and its cosine
// similarity to the query, in [-1, 1], higher is closer.
type Hit struct {
	Item
	Score float32 `json:"score"`
}

// Index is a vector index. Every method takes the tenant; tenants never
// share items, results or dimensions. Implementations are safe for
// concurrent use.
type Index interface {
	// Upsert writes items, replacing those with the same kind and id. It is
	// not atomic across items: when items fail, the error is a *BatchError
	// naming each failed item; the others may have been written, and a
	// failed item may be left absent or at its previous version. Any other
	// error (a lost connection) may leave any subset written. Writing the
	// same items again is harmless.
	Upsert(ctx context.Context, tenant string, items []Item) error
	// Delete removes the items with these ids, of the given kinds, or of
	// every kind when none is given. Absent ids are ignored.
	Delete(ctx context.Context, tenant string, ids []string, kinds ...Kind) error
	// DeleteByDoc removes every item that has docID among its sources, of
	// the given kinds, or of every kind when none is given.
	DeleteByDoc(ctx context.Context, tenant, docID string, kinds ...Kind) error
	// PatchSources changes the sources of existing items without
	// rewriting them whole (their text, vector and metadata stay): see
	// SourcePatch. applied[i] reports whether patches[i] was applied; a
	// patch is not applied, and changes nothing, when its item is absent
	// or holds another text or metadata than the patch names, or would be
	// left with more than MaxSources sources; the caller then writes the
	// item whole. An item left without sources is removed. Like Upsert it
	// is not atomic across patches, and applying the same patches again is
	// harmless.
	PatchSources(ctx context.Context, tenant string, patches []SourcePatch) (applied []bool, err error)
	// UpdateACL replaces the ACL recorded for docID in every item that has
	// it among its sources; a revocation takes effect for the next Search.
	UpdateACL(ctx context.Context, tenant, docID string, acl provenance.ACL) error
	// Search returns at most k items of kind, most similar to vector first,
	// among the items f may read: the ACL filter is applied before ranking.
	// Equal scores come in id order, though which of several items tied at
	// the k-th place is returned is up to the adapter. An unknown tenant has
	// no items. Adapters may approximate (Weaviate's HNSW does beyond its
	// flat-search cutoff); the embedded adapter is exact.
	Search(ctx context.Context, tenant string, kind Kind, vector []float32, k int, f Filter) ([]Hit, error)
	// ScanSources calls fn with the kind, id and stored sources (ACLs as
	// NormalizeACL leaves them) of every item that has docID among its
	// sources, or of every item of the tenant when docID is "", in no
	// particular order; it is how an audit compares the index's ACL copies
	// with the registry. An unknown tenant has no items. An error of fn
	// stops the scan and is returned.
	ScanSources(ctx context.Context, tenant, docID string, fn func(ItemSources) error) error
	// Close releases the index. Calls after Close fail with ErrClosed.
	Close() error
}

// DocKinds names the items of one document of the given kinds (of every
// kind when Kinds is empty), as DeleteByDoc takes them.
type DocKinds struct {
	DocID string
	Kinds []Kind
}

// SourcePatch names one item (Kind, ID) as the caller would write it (Text,
// Metadata) and the changes to its sources: each of Put replaces the
// item's source of the same document, keeping its place, or is added
// after the others; each document of Remove loses its source. An item
// built from thousands of documents (a hub entity) changes by one source
// when one of them is edited, and is neither embedded nor written again.
type SourcePatch struct {
	Kind     Kind
	ID       string
	Text     string
	Metadata map[string]string
	Put      []Source
	Remove   []string
}

// ValidatePatches checks PatchSources's arguments: each patch's kind and
// id, its sources as ValidateItem checks an item's, every document named
// once per patch (in Put or Remove), and no (kind, id) twice.
func ValidatePatches(tenant string, patches []SourcePatch) error {
	if err := ValidateTenant(tenant); err != nil {
		return err
	}
	seenItem := make(map[itemKey]bool, len(patches))
	for _, p := range patches {
		if err := ValidateID(p.ID); err != nil {
			return err
		}
		if !p.Kind.Valid() {
			return fmt.Errorf("%w: unknown kind %q", ErrInvalid, p.Kind)
		}
		if seenItem[itemKey{p.Kind, p.ID}] {
			return fmt.Errorf("%w: item %s %q patched twice", ErrInvalid, p.Kind, p.ID)
		}
		seenItem[itemKey{p.Kind, p.ID}] = true
		if len(p.Put)+len(p.Remove) > MaxSources {
			return fmt.Errorf("%w: patch of %q names %d sources, want at most %d", ErrInvalid, p.ID, len(p.Put)+len(p.Remove), MaxSources)
		}
		seen := make(map[string]bool, len(p.Put)+len(p.Remove))
		for _, s := range p.Put {
			if err := validateSource(s, seen, p.ID); err != nil {
				return err
			}
		}
		for _, d := range p.Remove {
			if err := ValidateDocID(d); err != nil {
				return err
			}
			if err := once(d, seen, p.ID); err != nil {
				return err
			}
		}
		if !utf8.ValidString(p.Text) {
			return fmt.Errorf("%w: text is not UTF-8", ErrInvalid)
		}
	}
	return nil
}

// itemKey identifies an item within a tenant.
type itemKey struct {
	kind Kind
	id   string
}

// validateSource checks one source of an item, or of the patch of the item
// patched (a Put): a valid document id, a version of at least 1, and a
// document not in seen, which it then adds to seen.
func validateSource(s Source, seen map[string]bool, patched string) error {
	if err := ValidateDocID(s.DocID); err != nil {
		return err
	}
	if s.Version < 1 {
		return fmt.Errorf("%w: source %q has version %d, want >= 1", ErrInvalid, s.DocID, s.Version)
	}
	return once(s.DocID, seen, patched)
}

// once adds docID to seen, failing if it is there already: the document
// is twice among an item's sources, or in the patch of the item patched.
func once(docID string, seen map[string]bool, patched string) error {
	switch {
	case !seen[docID]:
	case patched == "":
		return fmt.Errorf("%w: source %q listed twice", ErrInvalid, docID)
	default:
		return fmt.Errorf("%w: source %q named twice in the patch of %q", ErrInvalid, docID, patched)
	}
	seen[docID] = true
	return nil
}

// Holds reports whether an item with text and metadata is what the patch
// names (an empty metadata map equals nil).
func (p SourcePatch) Holds(text string, metadata map[string]string) bool {
	return text == p.Text && maps.Equal(metadata, p.Metadata)
}

// Index returns the patch's Put by document, ACLs normalised, and its
// Remove as a set.
func (p SourcePatch) Index() (put map[string]Source, drop map[string]bool) {
	drop = make(map[string]bool, len(p.Remove))
	for _, d := range p.Remove {
		drop[d] = true
	}
	put = make(map[string]Source, len(p.Put))
	for _, s := range p.Put {
		s.ACL = NormalizeACL(s.ACL)
		put[s.DocID] = s
	}
	return put, drop
}

// PatchedSources returns srcs with the patch applied (see SourcePatch),
// ACLs normalised; srcs is not modified. It is the reference every
// adapter's PatchSources must agree with.
func (p SourcePatch) PatchedSources(srcs []Source) []Source {
	put, drop := p.Index()
	out := make([]Source, 0, len(srcs)+len(p.Put))
	for _, s := range srcs {
		switch n, ok := put[s.DocID]; {
		case drop[s.DocID]:
		case ok:
			out = append(out, n)
			delete(put, s.DocID)
		default:
			out = append(out, s)
		}
	}
	for _, s := range p.Put {
		if _, ok := put[s.DocID]; ok {
			out = append(out, put[s.DocID])
		}
	}
	return out
}

// ItemError is the failure of one item of a batch.
type ItemError struct {
	Kind Kind
	ID   string
	Err  error
}

func (e ItemError) Error() string { return fmt.Sprintf("%s %q: %v", e.Kind, e.ID, e.Err) }

// Unwrap returns the cause.
func (e ItemError) Unwrap() error { return e.Err }

// BatchError lists the items of an Upsert that failed, in batch order.
type BatchError struct {
	Failed []ItemError
}

func (e *BatchError) Error() string {
	const show = 5
	parts := make([]string, 0, show+1)
	for i, f := range e.Failed {
		if i == show {
			parts = append(parts, fmt.Sprintf("and %d more", len(e.Failed)-show))
			break
		}
		parts = append(parts, f.Error())
	}
	return fmt.Sprintf("%d item(s) failed: %s", len(e.Failed), strings.Join(parts, "; "))
}

// Unwrap returns every item's error, so errors.Is(err, ErrInvalid) holds
// when any item was invalid.
func (e *BatchError) Unwrap() []error {
	errs := make([]error, len(e.Failed))
	for i, f := range e.Failed {
		errs[i] = f
	}
	return errs
}

// Failed reports whether err is a *BatchError naming the item (kind, id).
func Failed(err error, kind Kind, id string) bool {
	var be *BatchError
	if !errors.As(err, &be) {
		return false
	}
	return slices.ContainsFunc(be.Failed, func(f ItemError) bool { return f.Kind == kind && f.ID == id })
}

// ValidateTenant checks a tenant name.
func ValidateTenant(tenant string) error {
	if err := provenance.ValidateTenant(tenant); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// ValidateID checks an item id: 1..MaxIDLen bytes of UTF-8 without control
// characters.
func ValidateID(id string) error {
	if id == "" || len(id) > MaxIDLen {
		return fmt.Errorf("%w: item id %q must be 1 to %d bytes", ErrInvalid, id, MaxIDLen)
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("%w: item id %q is not UTF-8", ErrInvalid, id)
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: item id %q contains a control character", ErrInvalid, id)
		}
	}
	return nil
}

// ValidateVector checks that v can be compared by cosine: 1..MaxDimensions
// finite components, not all zero.
func ValidateVector(v []float32) error {
	if len(v) == 0 || len(v) > MaxDimensions {
		return fmt.Errorf("%w: vector has %d dimensions, want 1 to %d", ErrInvalid, len(v), MaxDimensions)
	}
	var sum float64
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("%w: vector component %d is %v", ErrInvalid, i, x)
		}
		sum += float64(x) * float64(x)
	}
	if sum == 0 {
		return fmt.Errorf("%w: vector is zero", ErrInvalid)
	}
	return nil
}

// ValidateItem checks one item on its own (not its dimensions against the
// stored ones, which only an adapter knows).
func ValidateItem(it Item) error {
	if err := ValidateID(it.ID); err != nil {
		return err
	}
	if !it.Kind.Valid() {
		return fmt.Errorf("%w: unknown kind %q", ErrInvalid, it.Kind)
	}
	if err := ValidateVector(it.Vector); err != nil {
		return err
	}
	if !utf8.ValidString(it.Text) {
		return fmt.Errorf("%w: text is not UTF-8", ErrInvalid)
	}
	if len(it.Sources) == 0 || len(it.Sources) > MaxSources {
		return fmt.Errorf("%w: %d sources, want 1 to %d", ErrInvalid, len(it.Sources), MaxSources)
	}
	seen := make(map[string]bool, len(it.Sources))
	for _, s := range it.Sources {
		if err := validateSource(s, seen, ""); err != nil {
			return err
		}
	}
	for k, v := range it.Metadata {
		if k == "" || !utf8.ValidString(k) || !utf8.ValidString(v) {
			return fmt.Errorf("%w: metadata key %q or its value is empty or not UTF-8", ErrInvalid, k)
		}
	}
	return nil
}

// ValidateItems checks a batch: each item on its own, and no (kind, id)
// twice. Every failure is reported in a *BatchError.
func ValidateItems(items []Item) error {
	var failed []ItemError
	seen := make(map[itemKey]bool, len(items))
	for _, it := range items {
		err := ValidateItem(it)
		if err == nil && seen[itemKey{it.Kind, it.ID}] {
			err = fmt.Errorf("%w: listed twice in one batch", ErrInvalid)
		}
		seen[itemKey{it.Kind, it.ID}] = true
		if err != nil {
			failed = append(failed, ItemError{Kind: it.Kind, ID: it.ID, Err: err})
		}
	}
	if failed != nil {
		return &BatchError{Failed: failed}
	}
	return nil
}

// ValidateSearch checks Search's arguments.
func ValidateSearch(tenant string, kind Kind, vector []float32, k int) error {
	if err := ValidateTenant(tenant); err != nil {
		return err
	}
	if !kind.Valid() {
		return fmt.Errorf("%w: unknown kind %q", ErrInvalid, kind)
	}
	if k < 1 || k > MaxK {
		return fmt.Errorf("%w: k = %d, want 1 to %d", ErrInvalid, k, MaxK)
	}
	return ValidateVector(vector)
}

// ValidateKinds checks a kinds argument (of Delete, DeleteByDoc) and
// returns the kinds it means: every kind when none is given.
func ValidateKinds(kinds []Kind) ([]Kind, error) {
	for _, k := range kinds {
		if !k.Valid() {
			return nil, fmt.Errorf("%w: unknown kind %q", ErrInvalid, k)
		}
	}
	if len(kinds) == 0 {
		return Kinds(), nil
	}
	return kinds, nil
}

// ValidateDocID checks a document id argument.
func ValidateDocID(docID string) error {
	if err := provenance.ValidateDocID(docID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// NormalizeACL returns acl sorted and deduplicated, with nil for empty
// lists: the form adapters store, so equal ACLs compare equal.
func NormalizeACL(acl provenance.ACL) provenance.ACL {
	acl = acl.Normalize()
	if len(acl.Groups) == 0 {
		acl.Groups = nil
	}
	if len(acl.Principals) == 0 {
		acl.Principals = nil
	}
	// The index filters reads; who may write a document is not its business.
	acl.Writers = provenance.Writers{}
	return acl
}

// Canonical returns a copy of it with normalised source ACLs and no empty
// metadata map, the form adapters store and return. The vector is shared.
func Canonical(it Item) Item {
	it.Sources = slices.Clone(it.Sources)
	for i := range it.Sources {
		it.Sources[i].ACL = NormalizeACL(it.Sources[i].ACL)
	}
	if len(it.Metadata) == 0 {
		it.Metadata = nil
	}
	return it
}

// Normalize returns v scaled to unit length (v must pass ValidateVector).
func Normalize(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	inv := 1 / math.Sqrt(sum)
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) * inv)
	}
	return out
}

// ValidateScan checks ScanSources's arguments: a valid tenant, and a valid
// document id unless docID is "" (every item of the tenant).
func ValidateScan(tenant, docID string) error {
	if err := ValidateTenant(tenant); err != nil {
		return err
	}
	if docID == "" {
		return nil
	}
	return ValidateDocID(docID)
}
