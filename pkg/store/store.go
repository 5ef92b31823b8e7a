// Package store defines kgstream's store contracts: the source registry, the
// graph store, the community store and the report store. Adapters live in
// subpackages named after their technology (embedded, redis); every adapter
// must pass the conformance suite in storetest.
package store

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/kgstream/kgstream/pkg/errkind"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
)

// Sentinel errors callers branch on, each of an errkind.Kind.
var (
	// ErrNotFound means the document, entity, community or report is absent.
	ErrNotFound = errkind.New(errkind.NotFound, "not found")
	// ErrStaleVersion means a version older than the latest was announced.
	ErrStaleVersion = errkind.New(errkind.Conflict, "stale version")
	// ErrConflict means a concurrent writer won; the operation may be retried.
	ErrConflict = errkind.New(errkind.Conflict, "conflict")
	// ErrInvalid means an argument (tenant, document id, version,
	// contribution) is malformed. Retrying cannot help: callers dead-letter.
	ErrInvalid = errkind.New(errkind.Invalid, "invalid argument")
)

// Announcement is a new content version of a document, as the gateway
// records it before publishing.
type Announcement struct {
	DocID string
	// Version 0 means the next version after the latest announced.
	Version   int64
	ACL       provenance.ACL
	Source    string
	Title     string
	UpdatedAt string
}

// Registry is the source registry: per document, the latest announced
// version, its ACL and its deleted flag. Every read path admits against it.
type Registry interface {
	// Announce records a content version. A version lower than the latest
	// announced fails with ErrStaleVersion; the same version again is an
	// idempotent replay that returns the current state (and updates ACL and
	// metadata). A deleted document comes back with a version above its
	// deletion's.
	Announce(ctx context.Context, tenant string, a Announcement) (provenance.SourceState, error)
	// SetACL replaces a document's ACL and bumps its ACL revision.
	// ErrNotFound for an unknown or deleted document.
	SetACL(ctx context.Context, tenant, docID string, acl provenance.ACL) (provenance.SourceState, error)
	// MarkDeleted records a deletion as a new version (latest + 1) and sets
	// Deleted. Deleting a deleted document returns its state unchanged.
	// ErrNotFound for a document never announced.
	MarkDeleted(ctx context.Context, tenant, docID string) (provenance.SourceState, error)
	// Sources returns the state of the given documents; unknown ids are absent.
	Sources(ctx context.Context, tenant string, docIDs []string) (map[string]provenance.SourceState, error)
	// ListSources returns every document of a tenant, deleted ones included,
	// sorted by doc id.
	ListSources(ctx context.Context, tenant string) ([]provenance.SourceState, error)
	// Tenants lists the tenants the registry knows, sorted.
	Tenants(ctx context.Context) ([]string, error)
}

// EntityContribution is one source's statement that an entity exists.
type EntityContribution struct {
	ID   string // canonical id, "type:key" (see package resolve)
	Type string
	Name string // spelling as seen
	// NameRank orders display-name candidates: lower wins (0 catalog title,
	// 1 catalog name, 2 mention). Among the lowest rank, the spelling most
	// documents use wins; on a tie, the lowest doc id's spelling.
	NameRank    int
	Description string
	TextUnits   []string
}

// EdgeContribution is one source's support for a directed typed edge.
type EdgeContribution struct {
	Source      string // entity id
	Relation    string
	Target      string // entity id
	Description string
	Weight      float64
	TextUnits   []string
}

// EdgeID is the id of the edge source -relation-> target.
func EdgeID(source, relation, target string) string { return source + "|" + relation + "|" + target }

// ID returns the edge's id.
func (c EdgeContribution) ID() string { return EdgeID(c.Source, c.Relation, c.Target) }

// Contributions is everything one document version contributes. Every edge
// endpoint must appear in Entities.
type Contributions struct {
	Title     string
	DocType   string
	TextUnits []events.TextUnit
	Entities  []EntityContribution
	Edges     []EdgeContribution
	// ReceivedAt is the gateway receipt of the version, kept for lag metrics.
	ReceivedAt time.Time
	// Resolution orders re-resolutions of one version: a contribution at the
	// applied version with a higher Resolution replaces the applied one (an
	// unmerge or alias change re-resolving stored mentions); the same or a
	// lower one is a Duplicate.
	Resolution int64
	// Raw is the extraction the contributions were resolved from, kept so
	// that they can be resolved again without re-extracting.
	Raw json.RawMessage
}

// Fragment is what one source version says of an entity or edge.
type Fragment struct {
	DocID       string   `json:"doc_id"`
	Version     int64    `json:"version"`
	TextUnits   []string `json:"text_units,omitempty"`
	Description string   `json:"description,omitempty"`
	Weight      float64  `json:"weight,omitempty"`
	Name        string   `json:"name,omitempty"`
	NameRank    int      `json:"name_rank,omitempty"`
}

// Entity is a resolved node with its per-source fragments (sorted by doc id).
type Entity struct {
	ID      string     `json:"id"`
	Type    string     `json:"type"`
	Name    string     `json:"name"`
	Sources []Fragment `json:"sources"`
}

// Edge is a directed typed edge with its per-source supports (sorted by doc id).
type Edge struct {
	ID       string     `json:"id"`
	Source   string     `json:"source"`
	Relation string     `json:"relation"`
	Target   string     `json:"target"`
	Supports []Fragment `json:"supports"`
}

// SourceRecord is what the graph store holds of one document: the applied
// version (or its deletion tombstone), its text units and the index of what
// it contributed.
type SourceRecord struct {
	DocID      string            `json:"doc_id"`
	Version    int64             `json:"version"`
	Deleted    bool              `json:"deleted,omitempty"`
	Title      string            `json:"title,omitempty"`
	DocType    string            `json:"doc_type,omitempty"`
	TextUnits  []events.TextUnit `json:"text_units,omitempty"`
	Entities   []string          `json:"entities,omitempty"` // sorted
	Edges      []string          `json:"edges,omitempty"`    // sorted
	AppliedAt  time.Time         `json:"applied_at"`
	ReceivedAt time.Time         `json:"received_at,omitzero"`
	// Resolution is the applied contributions' resolution (see Contributions).
	Resolution int64 `json:"resolution,omitempty"`
	// Raw is the extraction the applied contributions came from.
	Raw json.RawMessage `json:"raw,omitempty"`
}

// Outcome says what an Apply or Delete did.
type Outcome string

// Apply outcomes.
const (
	Applied   Outcome = "applied"
	Duplicate Outcome = "duplicate" // same version (and resolution) already applied: nothing changed
	Stale     Outcome = "stale"     // older than applied: nothing changed
)

// ApplyResult describes one Apply or Delete.
type ApplyResult struct {
	Outcome  Outcome
	Previous int64 // version applied before (0 if none)
	// Touched lists entity ids that were added, removed, or gained or lost an
	// edge, sorted.
	Touched                        []string
	EntitiesAdded, EntitiesRemoved int
	EdgesAdded, EdgesRemoved       int
}

// Direction selects edges by their relation to an entity.
type Direction int

// Edge directions.
const (
	Out Direction = iota
	In
)

// Graph is a whole tenant graph.
type Graph struct {
	Entities []Entity // sorted by id
	Edges    []Edge   // sorted by id
}

// AuditReport is the result of a full consistency scan.
type AuditReport struct {
	Sources  int
	Entities int
	Edges    int
	// OrphanEdges counts edges with no live supporting source, or a support
	// that does not match its source's applied version.
	OrphanEdges int
	// OrphanEntities counts entities with no live source.
	OrphanEntities int
	// IndexMismatches counts differences between source records' contribution
	// index and the supports found on entities and edges.
	IndexMismatches int
	Problems        []string // first few, human readable
}

// Stats are cheap counts of a tenant's graph.
type Stats struct {
	Sources  int // live (not deleted) sources
	Entities int
	Edges    int
}

// GraphStore holds the typed property graph with per-source provenance.
type GraphStore interface {
	// Apply retracts everything docID contributed before and adds c, in one
	// transaction. A version older than the applied one (or its deletion)
	// changes nothing (Stale); the applied version again changes nothing
	// (Duplicate). Entities and edges losing their last source are removed.
	Apply(ctx context.Context, tenant, docID string, version int64, c Contributions) (ApplyResult, error)
	// Delete retracts everything docID contributed and records a tombstone at
	// version, so older versions arriving later are stale.
	Delete(ctx context.Context, tenant, docID string, version int64) (ApplyResult, error)
	// ApplyBatch applies changes (each an Apply, or a Delete when
	// Change.Delete is set) in order, as the calls one after the other
	// would, in as few transactions as the adapter can (the embedded one:
	// one, so one commit). Each change gets its result and its error: a
	// change failing validation (ErrInvalid) changes nothing and the others
	// still apply. err, an error of the store itself, means nothing of the
	// batch may be assumed applied (a retry is safe: applies are
	// idempotent per version).
	ApplyBatch(ctx context.Context, tenant string, changes []Change) (results []ApplyResult, errs []error, err error)
	// Source returns a document's record (ErrNotFound if never applied).
	Source(ctx context.Context, tenant, docID string) (SourceRecord, error)
	// Entity returns one entity (ErrNotFound if absent).
	Entity(ctx context.Context, tenant, id string) (Entity, error)
	// Entities returns the entities among ids that exist.
	Entities(ctx context.Context, tenant string, ids []string) (map[string]Entity, error)
	// EntitiesByType returns every entity of a type, sorted by id; "" means all.
	EntitiesByType(ctx context.Context, tenant, typ string) ([]Entity, error)
	// Edges returns the edges leaving (Out) or entering (In) an entity, sorted by id.
	Edges(ctx context.Context, tenant, entityID string, dir Direction) ([]Edge, error)
	// EdgesByRelation returns the edges of a relation, sorted by id, through
	// the relation index; sourceType, when not "", keeps only the edges
	// whose source id has that type prefix ("incident" for
	// incident:… -failure-> failure_mode:…).
	EdgesByRelation(ctx context.Context, tenant, relation, sourceType string) ([]Edge, error)
	// EdgeCounts returns, for each of ids, how many edges leave (Out) or
	// enter (In) it, from the adjacency index without reading the edges.
	// Ids without edges count 0.
	EdgeCounts(ctx context.Context, tenant string, ids []string, dir Direction) (map[string]int, error)
	// EntitiesByName returns the entities whose display name or a
	// fragment's spelling has NameKey(name), sorted by id, through the name
	// index.
	EntitiesByName(ctx context.Context, tenant, name string) ([]Entity, error)
	// Snapshot returns the whole tenant graph.
	Snapshot(ctx context.Context, tenant string) (Graph, error)
	// Stats returns counts.
	Stats(ctx context.Context, tenant string) (Stats, error)
	// Audit scans the whole tenant graph for orphans and index mismatches.
	Audit(ctx context.Context, tenant string) (AuditReport, error)
	// GraphTenants lists the tenants with graph data, sorted.
	GraphTenants(ctx context.Context) ([]string, error)
}

// Community is one community of one clustering level.
type Community struct {
	ID         string   `json:"id"`
	Level      int      `json:"level"`
	Parent     string   `json:"parent,omitempty"`
	Children   []string `json:"children,omitempty"`
	Members    []string `json:"members"` // entity ids, sorted
	MemberHash string   `json:"member_hash"`
	// Sources is every (doc, version) supporting a member or an internal
	// edge when the community was computed.
	Sources []provenance.SourceRef `json:"sources"`
	Run     int64                  `json:"run"`
}

// CommunityStore holds a tenant's current hierarchy.
type CommunityStore interface {
	// ReplaceCommunities atomically replaces a tenant's communities with the
	// result of clustering run `run`.
	ReplaceCommunities(ctx context.Context, tenant string, run int64, cs []Community) error
	// Communities returns every community, sorted by level then id.
	Communities(ctx context.Context, tenant string) ([]Community, error)
	// LastRun returns the number of the last stored run (0 if none).
	LastRun(ctx context.Context, tenant string) (int64, error)
	// CommunitiesOf returns the communities holding any of the entities,
	// through the member index, sorted by level then id.
	CommunitiesOf(ctx context.Context, tenant string, entityIDs []string) ([]Community, error)
	// CommunitiesByID returns the communities among ids that are stored,
	// by id; absent ids are left out. Only those communities are read.
	CommunitiesByID(ctx context.Context, tenant string, ids []string) (map[string]Community, error)
	// Clustered returns which of the entities some stored community holds,
	// from the member index alone (no community is read); the others are
	// absent from the map.
	Clustered(ctx context.Context, tenant string, entityIDs []string) (map[string]bool, error)
	// UpdateCommunities replaces the stored communities with the ids of cs
	// (the others stay as they are) and their member index entries, in one
	// transaction, if run is still the last stored run: ErrConflict if
	// another run was stored since, ErrNotFound if an id is not stored.
	UpdateCommunities(ctx context.Context, tenant string, run int64, cs []Community) error
}

// Finding is one cited statement of a report.
type Finding struct {
	Summary     string                 `json:"summary"`
	Explanation string                 `json:"explanation"`
	Entities    []string               `json:"entities,omitempty"`
	Edges       []string               `json:"edges,omitempty"`
	Citations   []provenance.SourceRef `json:"citations"`
}

// Report is a community report and what it was built from.
type Report struct {
	ID                string                 `json:"id"`
	Community         string                 `json:"community"`
	Level             int                    `json:"level"`
	Title             string                 `json:"title"`
	Summary           string                 `json:"summary"`
	Findings          []Finding              `json:"findings"`
	Rating            float64                `json:"rating"`
	RatingExplanation string                 `json:"rating_explanation,omitempty"`
	Sources           []provenance.SourceRef `json:"sources"`
	MemberHash        string                 `json:"member_hash"`
	// InputHash fingerprints what the report was written from (members,
	// the edges leaving them, names, descriptions, documents; no versions
	// and no text units): a report whose member and input hashes are
	// unchanged only needs its citations moved to the current versions.
	InputHash string    `json:"input_hash,omitempty"`
	Writer    string    `json:"writer"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ReportStore holds community reports, indexed by the documents they cite.
type ReportStore interface {
	// PutReport stores r, replacing the report of the same id and its
	// citations in the by-source index.
	PutReport(ctx context.Context, tenant string, r Report) error
	// PutReports stores rs as PutReport stores each, in one transaction:
	// every report of rs is stored with its citations, or (on an error)
	// none is. Every report is checked before anything is written: an
	// invalid one, or an id twice in rs, fails with ErrInvalid. An empty
	// rs stores nothing.
	PutReports(ctx context.Context, tenant string, rs []Report) error
	// DeleteReport removes a report and its citations; an absent one is
	// not an error.
	DeleteReport(ctx context.Context, tenant, id string) error
	// DeleteReports removes the reports ids and their citations as
	// DeleteReport removes each, in one transaction: all of them or (on
	// an error) none. Absent ones, and an id given twice, are not errors.
	DeleteReports(ctx context.Context, tenant string, ids []string) error
	// Report returns one report (ErrNotFound if absent).
	Report(ctx context.Context, tenant, id string) (Report, error)
	// Reports returns every report of a tenant, sorted by id.
	Reports(ctx context.Context, tenant string) ([]Report, error)
	// ReportsByID returns the reports among ids that exist.
	ReportsByID(ctx context.Context, tenant string, ids []string) (map[string]Report, error)
	// ReportsBySource returns the reports citing docID among their Sources
	// (at any version), sorted by id, through the by-source index.
	ReportsBySource(ctx context.Context, tenant, docID string) ([]Report, error)
	// ReportCitations returns, per report id, the (doc, version) pairs of
	// its Sources (text units dropped, sorted), read from the index without
	// decoding the reports. Every stored report has an entry, an empty one
	// when it cites nothing.
	ReportCitations(ctx context.Context, tenant string) (map[string][]provenance.SourceRef, error)
	// ReportCitationsOf returns, per report citing any of docIDs among its
	// Sources (at any version), its citations as ReportCitations lists
	// them. It reads the by-source index for those documents and the
	// citations of the reports it names, decoding no report and reading
	// no other report's entry.
	ReportCitationsOf(ctx context.Context, tenant string, docIDs []string) (map[string][]provenance.SourceRef, error)
}

// CitationsOf returns the (doc, version) pairs of a report's Sources, text
// units dropped, sorted and without duplicates: what the by-source index
// of every adapter records.
func CitationsOf(r Report) []provenance.SourceRef {
	out := make([]provenance.SourceRef, 0, len(r.Sources))
	for _, s := range r.Sources {
		out = append(out, provenance.SourceRef{DocID: s.DocID, Version: s.Version})
	}
	slices.SortFunc(out, func(a, b provenance.SourceRef) int {
		return cmp.Or(cmp.Compare(a.DocID, b.DocID), cmp.Compare(a.Version, b.Version))
	})
	return slices.Compact(out)
}

// Stores is every store an adapter provides.
type Stores interface {
	Registry
	GraphStore
	CommunityStore
	ReportStore
	Outbox
	Ping(ctx context.Context) error
	Close() error
}
