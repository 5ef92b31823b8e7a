// Package provenance defines where a fact comes from (tenant, document,
// version, text unit), who may read a document (its ACL), who is asking
// (a Caller) and the admission rule every read path applies.
package provenance

import (
	"fmt"
	"iter"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kgstream/kgstream/pkg/errkind"
)

// Sentinel errors callers branch on, each of an errkind.Kind.
var (
	// ErrInvalidTenant means a tenant name is not a valid subject token.
	ErrInvalidTenant = errkind.New(errkind.Invalid, "invalid tenant")
	// ErrInvalidDocID means a document id is empty, too long, not UTF-8, or
	// has control, invisible or surrounding white-space characters.
	ErrInvalidDocID = errkind.New(errkind.Invalid, "invalid document id")
)

var tenantRE = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// ValidateTenant checks that t can be used as a NATS subject token.
func ValidateTenant(t string) error {
	if !tenantRE.MatchString(t) {
		return fmt.Errorf("%w: %q must match [a-z0-9_-]{1,64}", ErrInvalidTenant, t)
	}
	return nil
}

// MaxDocIDBytes is the longest document id, in bytes of UTF-8.
const MaxDocIDBytes = 512

// MaxVersion is the largest version the registry records: 2^53-1, the
// largest integer a JSON number keeps exact in every client. A deletion
// takes a version of its own, so content versions stop one below it
// (MaxContentVersion) and every document can still be deleted.
const MaxVersion int64 = 1<<53 - 1

// MaxContentVersion is the largest version a content change may have.
const MaxContentVersion = MaxVersion - 1

// ValidateVersion checks an explicit content version: 1 to
// MaxContentVersion (0, "the next one", is for the caller to handle).
func ValidateVersion(v int64) error {
	if v < 1 || v > MaxContentVersion {
		return fmt.Errorf("version %d must be between 1 and %d", v, MaxContentVersion)
	}
	return nil
}

// asciiDocID reports whether id is printable ASCII with no white space at
// either end: valid at once (no ASCII character is an invisible format
// character or a line or paragraph separator). Every other id takes the
// rune by rune checks. Item batches check every source of every item, and
// nearly every id is of this kind.
func asciiDocID(id string) bool {
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c >= 0x7f {
			return false
		}
	}
	return id[0] != ' ' && id[len(id)-1] != ' '
}

// ValidateDocID checks a document id: 1 to MaxDocIDBytes bytes of valid
// UTF-8, '/' and spaces inside allowed, without control characters,
// invisible format characters (bidi overrides, zero-width characters),
// line or paragraph separators, the replacement character U+FFFD, and without leading or trailing white
// space: an id must look like what it is.
func ValidateDocID(id string) error {
	if id == "" || len(id) > MaxDocIDBytes {
		return fmt.Errorf("%w: %q must be 1 to %d bytes", ErrInvalidDocID, id, MaxDocIDBytes)
	}
	if asciiDocID(id) {
		return nil
	}
	return checkDocIDRunes(id)
}

// checkDocIDRunes is ValidateDocID's check of an id's characters, one rune
// at a time.
func checkDocIDRunes(id string) error {
	if !utf8.ValidString(id) {
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalidDocID, id)
	}
	for i, r := range id {
		switch {
		case unicode.IsControl(r):
			return fmt.Errorf("%w: %q has a control character at byte %d", ErrInvalidDocID, id, i)
		case unicode.Is(unicode.Cf, r), unicode.Is(unicode.Zl, r), unicode.Is(unicode.Zp, r):
			return fmt.Errorf("%w: %q has the invisible character %U at byte %d", ErrInvalidDocID, id, r, i)
		case r == utf8.RuneError:
			// What a JSON decoder makes of invalid UTF-8: the id was mangled.
			return fmt.Errorf("%w: %q has the replacement character at byte %d", ErrInvalidDocID, id, i)
		}
	}
	first, _ := utf8.DecodeRuneInString(id)
	last, _ := utf8.DecodeLastRuneInString(id)
	if unicode.IsSpace(first) || unicode.IsSpace(last) {
		return fmt.Errorf("%w: %q starts or ends with white space", ErrInvalidDocID, id)
	}
	return nil
}

// ACL says who may read a document and, separately, who may write it. A
// nil *ACL in an API request means public within the tenant.
type ACL struct {
	Public     bool     `json:"public,omitempty"`
	Groups     []string `json:"groups,omitempty"`
	Principals []string `json:"principals,omitempty"`
	// Writers may overwrite, re-permission or delete the document, besides
	// writer and admin tokens. Reading never implies writing, nor writing
	// reading.
	Writers Writers `json:"writers,omitzero"`
}

// Writers names who may write a document: principals or groups.
type Writers struct {
	Groups     []string `json:"groups,omitempty"`
	Principals []string `json:"principals,omitempty"`
}

// IsZero reports whether w names no one.
func (w Writers) IsZero() bool { return len(w.Groups) == 0 && len(w.Principals) == 0 }

// PublicACL is the ACL of a document that did not say otherwise.
func PublicACL() ACL { return ACL{Public: true} }

// Normalize sorts and deduplicates the lists so equal ACLs compare equal.
func (a ACL) Normalize() ACL {
	norm := func(in []string) []string {
		out := make([]string, 0, len(in))
		for _, s := range in {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		sort.Strings(out)
		return slices.Compact(out)
	}
	return ACL{Public: a.Public, Groups: norm(a.Groups), Principals: norm(a.Principals),
		Writers: Writers{Groups: norm(a.Writers.Groups), Principals: norm(a.Writers.Principals)}}
}

// Equal reports whether a and b say the same once normalized.
func (a ACL) Equal(b ACL) bool {
	a, b = a.Normalize(), b.Normalize()
	return a.Public == b.Public && slices.Equal(a.Groups, b.Groups) && slices.Equal(a.Principals, b.Principals) &&
		slices.Equal(a.Writers.Groups, b.Writers.Groups) && slices.Equal(a.Writers.Principals, b.Writers.Principals)
}

// AdmitsWrite reports whether the ACL names c as a writer, by principal or
// group (tenant and token powers are checked by Writable).
func (a ACL) AdmitsWrite(c Caller) bool {
	return admits(a.Writers.Principals, a.Writers.Groups, c)
}

func admits(principals, groups []string, c Caller) bool {
	if c.Principal != "" && slices.Contains(principals, c.Principal) {
		return true
	}
	for _, g := range c.Groups {
		if g != "" && slices.Contains(groups, g) {
			return true
		}
	}
	return false
}

// Admits reports whether the ACL lets c read (tenant is checked by the caller
// of Admits, see Readable).
func (a ACL) Admits(c Caller) bool {
	return a.Public || admits(a.Principals, a.Groups, c)
}

// Caller is the identity a request runs as.
type Caller struct {
	Tenant    string   `json:"tenant"`
	Principal string   `json:"principal"`
	Groups    []string `json:"groups,omitempty"`
	// Admin callers may write every document of every tenant (token flag);
	// reads still obey ACLs.
	Admin bool `json:"admin,omitempty"`
	// Writer callers (ingestion service accounts) may write any document of
	// their tenant, also ones they cannot read; others may only overwrite,
	// re-permission or delete documents whose ACL names them as writers.
	Writer bool `json:"writer,omitempty"`
}

// ReadKey names what decides which documents c may read (Readable): the
// tenant, the principal and the groups, sorted and each once, each quoted
// (so no name can pass for two). Two callers with the same ReadKey read
// the same documents, so a reader may key what it keeps per caller on it.
func (c Caller) ReadKey() string {
	var b strings.Builder
	b.WriteString(strconv.Quote(c.Tenant))
	b.WriteByte(' ')
	b.WriteString(strconv.Quote(c.Principal))
	for _, g := range slices.Compact(slices.Sorted(slices.Values(c.Groups))) {
		b.WriteByte(' ')
		b.WriteString(strconv.Quote(g))
	}
	return b.String()
}

// SourceRef names one version of one document, optionally one text unit in it.
type SourceRef struct {
	DocID    string `json:"doc_id"`
	Version  int64  `json:"version"`
	TextUnit string `json:"text_unit,omitempty"`
}

// String renders the ref as doc@version[#unit].
func (r SourceRef) String() string {
	s := fmt.Sprintf("%s@%d", r.DocID, r.Version)
	if r.TextUnit != "" {
		s += "#" + r.TextUnit
	}
	return s
}

// SourceState is what the source registry knows of a document right now.
type SourceState struct {
	Tenant string `json:"tenant"`
	DocID  string `json:"doc_id"`
	// Version is the latest announced content version (monotonic per doc).
	// A deletion is announced as a new version with Deleted set.
	Version int64 `json:"version"`
	// ACLRevision counts ACL changes, so each one gets its own event id.
	ACLRevision int64  `json:"acl_revision"`
	ACL         ACL    `json:"acl"`
	Deleted     bool   `json:"deleted,omitempty"`
	Source      string `json:"source,omitempty"`
	Title       string `json:"title,omitempty"`
	UpdatedAt   string `json:"updated_at,omitempty"`
	// ContentHash is the gateway's hash of this version's content (text,
	// title, type, source), recorded once its event was acknowledged; a
	// new version or a replay clears it. An identical document posted
	// again is then a no-op.
	ContentHash string `json:"content_hash,omitempty"`
}

// Readable is the admission rule for one source: same tenant, not deleted,
// and the current ACL admits the caller.
func Readable(c Caller, s SourceState) bool {
	return s.Tenant == c.Tenant && !s.Deleted && s.ACL.Admits(c)
}

// Writable is the write rule for one known document: admin callers may
// write every document, writer callers every document of their tenant,
// others only the documents whose ACL names them as writers. Reading is
// not enough.
func Writable(c Caller, s SourceState) bool {
	switch {
	case c.Admin:
		return true
	case s.Tenant != c.Tenant:
		return false
	}
	return c.Writer || s.ACL.AdmitsWrite(c)
}

// Lookup gives the registry's current state of a set of documents of one
// tenant. A document the registry does not know is absent from the map.
// A lookup may instead give the admitter a complete snapshot (UseSnapshot
// or UseSnapshotReadable, as a request that lists the whole registry for
// a large lookup does) and return nothing: the admitter then answers
// every id from the snapshot, with no copy of the states asked for.
type Lookup func(docIDs []string) (map[string]SourceState, error)

// Admitter applies the admission rule for one caller against one registry
// snapshot. It caches lookups for the duration of one request, so a request
// sees one consistent view and the registry is asked once per document.
type Admitter struct {
	caller Caller
	lookup Lookup
	cache  map[string]SourceState
	known  map[string]bool
	// snap, once set, answers every id not already looked up (UseSnapshot).
	snap func(id string) (SourceState, bool)
	// prepare runs before the first answer (BeforeFirstUse).
	prepare func() error
	// direct keeps Direct's answers by id.
	direct map[string]bool
	// readable, once set with the snapshot, is Direct's answer for every id
	// the snapshot answers (UseSnapshotReadable).
	readable func(id string) bool
}

// BeforeFirstUse makes fn run once before the admitter first answers or
// looks anything up (where a request takes its registry snapshot, so even
// the first lookup can be answered from it). An error from fn fails that
// call closed, and fn runs again on the next.
func (a *Admitter) BeforeFirstUse(fn func() error) { a.prepare = fn }

func (a *Admitter) ready() error {
	if a.prepare == nil {
		return nil
	}
	if err := a.prepare(); err != nil {
		return fmt.Errorf("looking up sources: %w", err)
	}
	a.prepare = nil
	return nil
}

// UseSnapshot gives the admitter a complete registry view taken for this
// request (a listing of the tenant's registry): from then on every id not
// already looked up is answered from it, with no lookup and no copy, and
// an id it does not hold is unknown. States already looked up keep
// answering as before, so no document changes its answer within a request.
func (a *Admitter) UseSnapshot(state func(id string) (SourceState, bool)) {
	a.snap, a.readable = state, nil
}

// UseSnapshotReadable is UseSnapshot with Direct's answers for the caller
// computed ahead from the same snapshot: readable(id) must equal
// "state(id) is known and Readable(caller, it)" for every id (a view kept
// for many requests computes it once per caller). Direct then answers an
// id not already looked up with one call, keeping nothing.
func (a *Admitter) UseSnapshotReadable(state func(id string) (SourceState, bool), readable func(id string) bool) {
	a.snap, a.readable = state, readable
}

// NewAdmitter returns an Admitter for caller c.
func NewAdmitter(c Caller, lookup Lookup) *Admitter {
	return &Admitter{caller: c, lookup: lookup, cache: map[string]SourceState{}, known: map[string]bool{}}
}

// Caller returns the identity the admitter checks for.
func (a *Admitter) Caller() Caller { return a.caller }

// PrefetchSeq is Prefetch of the ids ids yields, which are gathered only
// when a lookup is needed: with a snapshot in use (after the
// BeforeFirstUse hook ran) ids is not iterated at all, so a caller with
// thousands of sources to name pays nothing for them.
func (a *Admitter) PrefetchSeq(ids iter.Seq[string]) error {
	if err := a.ready(); err != nil {
		return err
	}
	if a.snap != nil {
		return nil
	}
	return a.Prefetch(slices.Collect(ids))
}

// Prefetch loads the state of ids in one registry call.
func (a *Admitter) Prefetch(ids []string) error {
	if err := a.ready(); err != nil {
		return err
	}
	if a.snap != nil {
		return nil // every id is answered from the snapshot
	}
	var missing []string
	for _, id := range ids {
		if !a.known[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	missing = slices.Compact(missing)
	got, err := a.lookup(missing)
	if err != nil {
		return fmt.Errorf("looking up sources: %w", err)
	}
	if a.snap != nil {
		return nil // the lookup gave a snapshot: it answers every id
	}
	for _, id := range missing {
		a.known[id] = true
		if s, ok := got[id]; ok {
			a.cache[id] = s
		}
	}
	return nil
}

func (a *Admitter) state(id string) (SourceState, bool, error) {
	if err := a.ready(); err != nil {
		return SourceState{}, false, err
	}
	if a.snap != nil && !a.known[id] {
		s, ok := a.snap(id)
		return s, ok, nil
	}
	if !a.known[id] { // known ids are answered without a lookup or an allocation
		if err := a.Prefetch([]string{id}); err != nil {
			return SourceState{}, false, err
		}
	}
	s, ok := a.cache[id]
	return s, ok, nil
}

// Direct reports whether a direct contribution of document id (any version)
// may be shown: the document is readable now. It fails closed on error.
func (a *Admitter) Direct(id string) (bool, error) {
	if r, ok := a.direct[id]; ok {
		return r, nil
	}
	if err := a.ready(); err != nil {
		return false, err
	}
	if a.readable != nil && !a.known[id] {
		return a.readable(id), nil // from the snapshot, as state would answer
	}
	s, ok, err := a.state(id)
	if err != nil {
		return false, err
	}
	r := ok && Readable(a.caller, s)
	// An id's state does not change within the admitter (looked up once,
	// or from an immutable snapshot): its answer is kept.
	if a.direct == nil {
		a.direct = map[string]bool{}
	}
	a.direct[id] = r
	return r, nil
}

// Derived reports whether an artifact built from refs may be shown: every
// source is readable AND still at the version the artifact was built from.
// An artifact built from no source is not admitted.
func (a *Admitter) Derived(refs []SourceRef) (bool, error) {
	if len(refs) == 0 {
		return false, nil
	}
	if err := a.ready(); err != nil {
		return false, err
	}
	if a.snap == nil {
		ids := make([]string, len(refs))
		for i, r := range refs {
			ids[i] = r.DocID
		}
		if err := a.Prefetch(ids); err != nil {
			return false, err
		}
	}
	for _, r := range refs {
		s, ok, _ := a.state(r.DocID) // known after the prefetch, or from the snapshot
		if !ok || !Readable(a.caller, s) || s.Version != r.Version {
			return false, nil
		}
	}
	return true, nil
}
