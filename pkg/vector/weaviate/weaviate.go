// Package weaviate implements vector.Index on Weaviate, the scale-out
// adapter, with weaviate-go-client v5.
//
// # Layout
//
// One collection per kind (<Collection>TextUnit, <Collection>Entity,
// <Collection>Report), each multi-tenant: a kgstream tenant is a Weaviate
// tenant of all three, created on first write, so tenants share nothing, not
// even an HNSW graph. Vectors are ours (vectorizer none, cosine distance).
// An object's UUID is derived from its kind and id, so an upsert replaces.
//
// Properties of every object:
//
//	item_id    the item id (stored, not indexed)
//	item_key   hex hash of the id (filterable; Delete and paging use it)
//	text       the item text (stored, not indexed)
//	doc_keys   hex hashes of the source document ids (filterable)
//	sources    JSON of []vector.Source, the exact sources and ACLs
//	metadata   JSON of the metadata map
//	acl0..acl7 ACL slots (filterable), see below
//
// Ids and document ids are hashed before they reach a filter so that
// Weaviate's tokenization (which trims whitespace) and GraphQL quoting
// never change what matches.
//
// # ACL pre-filtering
//
// A caller reads an item when every source's ACL admits it. Each distinct
// non-public source ACL becomes one slot, a text[] of reader tokens (a
// hashed "p:<principal>" or "g:<group>" per entry, or a token nobody holds
// for an ACL naming nobody); unused slots hold the public token. A search
// sends the caller's tokens (public, its principal, its groups) and
// requires every slot to contain one of them: AND over slots of
// ContainsAny, in the near-vector query's where filter, so Weaviate ranks
// only admitted objects. An item with more distinct ACLs than slots has
// the surplus folded into the last slot as the intersection of their
// tokens, which admits only callers every folded ACL admits: stricter,
// never looser. Hits are re-checked against the exact sources as well.
//
// # Batches
//
// Upsert checks each object's result in Weaviate's batch reply and names
// every failure in a *vector.BatchError. An object whose vector Weaviate
// refuses is still written to its object store, where it would break later
// filtered searches, so failed objects are deleted again. Dimensions are
// checked before sending, against the dimensions of the tenant's stored
// objects, so a mismatch never reaches Weaviate in the first place.
package weaviate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-openapi/strfmt"
	"github.com/google/uuid"
	wv "github.com/weaviate/weaviate-go-client/v5/weaviate"
	"github.com/weaviate/weaviate-go-client/v5/weaviate/auth"
	"github.com/weaviate/weaviate-go-client/v5/weaviate/fault"
	"github.com/weaviate/weaviate-go-client/v5/weaviate/filters"
	"github.com/weaviate/weaviate-go-client/v5/weaviate/graphql"
	wvgrpc "github.com/weaviate/weaviate-go-client/v5/weaviate/grpc"
	"github.com/weaviate/weaviate/entities/models"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/vector"
)

// Defaults of Config.
const (
	DefaultCollection = "Kgstream"
	DefaultBatchSize  = 200
	DefaultTimeout    = 30 * time.Second
)

// Slots is the number of ACL slots of an object.
const Slots = 8

// defaultPageSize bounds the objects UpdateACL reads per request.
const defaultPageSize = 500

// deleteChunk bounds the ids of one batch delete.
const deleteChunk = 500

var collectionRE = regexp.MustCompile(`^[A-Z][_0-9A-Za-z]{0,200}$`)

// Config configures New.
type Config struct {
	// URL of Weaviate's REST API, e.g. http://127.0.0.1:8080. Required.
	URL string
	// GRPCAddr is host:port of Weaviate's gRPC API. Batches go over gRPC
	// when it is set, over REST otherwise.
	GRPCAddr string
	// APIKey authenticates when set; anonymous access otherwise.
	APIKey string
	// Collection prefixes the collection names; "" means DefaultCollection.
	// It must start with an upper-case letter.
	Collection string
	// BatchSize bounds the objects of one write request; 0 means
	// DefaultBatchSize.
	BatchSize int
	// Timeout bounds each request; 0 means DefaultTimeout.
	Timeout time.Duration
	// StartupTimeout is how long New waits for Weaviate to answer; 0 means
	// it must answer at once.
	StartupTimeout time.Duration
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
}

// Validate checks the config (after defaults).
func (c Config) Validate() error {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: weaviate URL %q must be http(s)://host[:port]", vector.ErrInvalid, c.URL)
	}
	if c.Collection != "" && !collectionRE.MatchString(c.Collection) {
		return fmt.Errorf("%w: collection prefix %q must match %s", vector.ErrInvalid, c.Collection, collectionRE)
	}
	if c.BatchSize < 0 || c.Timeout < 0 || c.StartupTimeout < 0 {
		return fmt.Errorf("%w: negative batch size or timeout", vector.ErrInvalid)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Collection == "" {
		c.Collection = DefaultCollection
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Index is the Weaviate vector index.
type Index struct {
	cfg     Config
	client  *wv.Client
	http    *http.Client
	log     *slog.Logger
	classes map[vector.Kind]string
	closed  atomic.Bool
	// pageSize is defaultPageSize; tests lower it to exercise paging.
	pageSize int

	// tenants holds "<class>\x00<tenant>" of tenants known to exist; dims
	// holds "<class>\x00<tenant>" -> dimensions of the stored vectors.
	tenants sync.Map
	dims    sync.Map
}

var _ vector.Index = (*Index)(nil)

// New connects to Weaviate and creates the three collections if missing.
func New(ctx context.Context, cfg Config) (*Index, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("connecting to weaviate: %w", err)
	}
	cfg = cfg.withDefaults()
	u, _ := url.Parse(cfg.URL)
	hc := &http.Client{Timeout: cfg.Timeout}
	wcfg := wv.Config{Host: u.Host, Scheme: u.Scheme, Timeout: cfg.Timeout, StartupTimeout: cfg.StartupTimeout}
	if cfg.APIKey != "" {
		wcfg.AuthConfig = auth.ApiKey{Value: cfg.APIKey}
	} else {
		wcfg.ConnectionClient = hc
	}
	if cfg.GRPCAddr != "" {
		wcfg.GrpcConfig = &wvgrpc.Config{Host: cfg.GRPCAddr, Secured: u.Scheme == "https"}
	}
	client, err := wv.NewClient(wcfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to weaviate at %s: %w", cfg.URL, err)
	}
	ix := &Index{cfg: cfg, client: client, http: hc, log: cfg.Logger, pageSize: defaultPageSize, classes: map[vector.Kind]string{
		vector.KindTextUnit: cfg.Collection + "TextUnit",
		vector.KindEntity:   cfg.Collection + "Entity",
		vector.KindReport:   cfg.Collection + "Report",
	}}
	for _, k := range vector.Kinds() {
		if err := ix.ensureClass(ctx, k); err != nil {
			return nil, fmt.Errorf("connecting to weaviate at %s: %w", cfg.URL, err)
		}
	}
	return ix, nil
}

// Collections returns the collection name of each kind.
func (ix *Index) Collections() map[vector.Kind]string { return maps(ix.classes) }

func maps(m map[vector.Kind]string) map[vector.Kind]string {
	out := make(map[vector.Kind]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Close marks the index closed and drops idle connections. (The client
// offers no way to close its gRPC connection.)
func (ix *Index) Close() error {
	if ix.closed.Swap(true) {
		return nil
	}
	ix.http.CloseIdleConnections()
	return nil
}

// Drop deletes the index's collections and everything in them, for tests
// and for an operator resetting a deployment. It works on a closed index.
func (ix *Index) Drop(ctx context.Context) error {
	var errs []error
	for _, k := range vector.Kinds() {
		class := ix.classes[k]
		if err := ix.client.Schema().ClassDeleter().WithClassName(class).Do(ctx); err != nil && !isStatus(err, http.StatusNotFound) {
			errs = append(errs, fmt.Errorf("deleting collection %s: %w", class, err))
		}
	}
	ix.tenants.Clear()
	ix.dims.Clear()
	return errors.Join(errs...)
}

func boolp(b bool) *bool { return &b }

func properties() []*models.Property {
	text := func(name string, filterable bool) *models.Property {
		return &models.Property{Name: name, DataType: []string{"text"}, Tokenization: models.PropertyTokenizationField,
			IndexFilterable: boolp(filterable), IndexSearchable: boolp(false)}
	}
	list := func(name string) *models.Property {
		return &models.Property{Name: name, DataType: []string{"text[]"}, Tokenization: models.PropertyTokenizationField,
			IndexFilterable: boolp(true), IndexSearchable: boolp(false)}
	}
	props := []*models.Property{
		text("item_id", false), text("item_key", true), text("text", false),
		list("doc_keys"), text("sources", false), text("metadata", false),
	}
	for i := range Slots {
		props = append(props, list(slotName(i)))
	}
	return props
}

func slotName(i int) string { return fmt.Sprintf("acl%d", i) }

func (ix *Index) ensureClass(ctx context.Context, kind vector.Kind) error {
	class := ix.classes[kind]
	exists, err := ix.client.Schema().ClassExistenceChecker().WithClassName(class).Do(ctx)
	if err != nil {
		return fmt.Errorf("checking collection %s: %w", class, err)
	}
	if !exists {
		err = ix.client.Schema().ClassCreator().WithClass(&models.Class{
			Class:              class,
			Description:        fmt.Sprintf("kgstream %s vectors", kind),
			Vectorizer:         "none",
			VectorIndexType:    "hnsw",
			VectorIndexConfig:  map[string]any{"distance": "cosine"},
			MultiTenancyConfig: &models.MultiTenancyConfig{Enabled: true},
			Properties:         properties(),
		}).Do(ctx)
		if err == nil {
			return nil
		}
		// Another process may have created it meanwhile; check it below.
		ix.log.Warn("creating weaviate collection failed, checking whether it exists", "collection", class, "error", err)
	}
	got, gerr := ix.client.Schema().ClassGetter().WithClassName(class).Do(ctx)
	if gerr != nil {
		return fmt.Errorf("creating collection %s: %w", class, errors.Join(err, gerr))
	}
	if got.MultiTenancyConfig == nil || !got.MultiTenancyConfig.Enabled {
		return fmt.Errorf("collection %s exists without multi-tenancy: it was not made by kgstream", class)
	}
	have := map[string]bool{}
	for _, p := range got.Properties {
		have[p.Name] = true
	}
	for _, p := range properties() {
		if !have[p.Name] {
			return fmt.Errorf("collection %s lacks property %q: it was made by another version", class, p.Name)
		}
	}
	return nil
}

// --- tenants and dimensions ------------------------------------------------

func cacheKey(class, tenant string) string { return class + "\x00" + tenant }

// ensureTenant creates the tenant in every collection, once per process.
func (ix *Index) ensureTenant(ctx context.Context, tenant string) error {
	for _, k := range vector.Kinds() {
		class := ix.classes[k]
		if _, ok := ix.tenants.Load(cacheKey(class, tenant)); ok {
			continue
		}
		// Creating an existing tenant is a no-op for Weaviate.
		err := ix.client.Schema().TenantsCreator().WithClassName(class).WithTenants(models.Tenant{Name: tenant}).Do(ctx)
		if err != nil {
			return fmt.Errorf("creating tenant %q in %s: %w", tenant, class, err)
		}
		ix.tenants.Store(cacheKey(class, tenant), true)
	}
	return nil
}

// hasTenant reports whether the tenant exists in the kind's collection.
func (ix *Index) hasTenant(ctx context.Context, kind vector.Kind, tenant string) (bool, error) {
	class := ix.classes[kind]
	if _, ok := ix.tenants.Load(cacheKey(class, tenant)); ok {
		return true, nil
	}
	ok, err := ix.client.Schema().TenantsExists().WithClassName(class).WithTenant(tenant).Do(ctx)
	if err != nil {
		return false, fmt.Errorf("checking tenant %q in %s: %w", tenant, class, err)
	}
	if ok {
		ix.tenants.Store(cacheKey(class, tenant), true)
	}
	return ok, nil
}

// storedDims returns the dimensions of the tenant's stored vectors of kind,
// or 0 when it has none.
func (ix *Index) storedDims(ctx context.Context, kind vector.Kind, tenant string) (int, error) {
	class := ix.classes[kind]
	if d, ok := ix.dims.Load(cacheKey(class, tenant)); ok {
		return d.(int), nil
	}
	resp, err := ix.client.GraphQL().Get().WithClassName(class).WithTenant(tenant).WithLimit(1).
		WithFields(graphql.Field{Name: "_additional", Fields: []graphql.Field{{Name: "vector"}}}).Do(ctx)
	objs, err := objects(resp, err, class)
	if err != nil {
		return 0, fmt.Errorf("reading the dimensions of %s in %q: %w", class, tenant, err)
	}
	if len(objs) == 0 {
		return 0, nil
	}
	v, err := floats(additional(objs[0])["vector"])
	if err != nil {
		return 0, fmt.Errorf("reading the dimensions of %s in %q: %w", class, tenant, err)
	}
	ix.dims.Store(cacheKey(class, tenant), len(v))
	return len(v), nil
}

// --- writes ----------------------------------------------------------------

// Upsert writes items in batches, checking every object's result.
func (ix *Index) Upsert(ctx context.Context, tenant string, items []vector.Item) error {
	if err := ix.upsert(ctx, tenant, items); err != nil {
		return fmt.Errorf("upserting %d items into %q: %w", len(items), tenant, err)
	}
	return nil
}

func (ix *Index) upsert(ctx context.Context, tenant string, items []vector.Item) error {
	if ix.closed.Load() {
		return vector.ErrClosed
	}
	if err := vector.ValidateTenant(tenant); err != nil {
		return err
	}
	if err := vector.ValidateItems(items); err != nil {
		return err
	}
	if len(items) == 0 {
		return ctx.Err()
	}
	if err := ix.ensureTenant(ctx, tenant); err != nil {
		return err
	}
	var failed []vector.ItemError
	dims := map[vector.Kind]int{}
	send := make([]vector.Item, 0, len(items))
	for _, it := range items {
		want, ok := dims[it.Kind]
		if !ok {
			d, err := ix.storedDims(ctx, it.Kind, tenant)
			if err != nil {
				return err
			}
			if d == 0 {
				d = len(it.Vector)
			}
			dims[it.Kind], want = d, d
		}
		if len(it.Vector) != want {
			failed = append(failed, vector.ItemError{Kind: it.Kind, ID: it.ID,
				Err: fmt.Errorf("%w: vector has %d dimensions, %s items of this tenant have %d", vector.ErrInvalid, len(it.Vector), it.Kind, want)})
			continue
		}
		it = vector.Canonical(it)
		it.Vector = vector.Normalize(it.Vector)
		send = append(send, it)
	}
	batchFailed, err := ix.write(ctx, tenant, send)
	if err != nil {
		return err
	}
	failed = append(failed, batchFailed...)
	for k, d := range dims {
		if !slices.ContainsFunc(failed, func(f vector.ItemError) bool { return f.Kind == k }) {
			ix.dims.Store(cacheKey(ix.classes[k], tenant), d)
		}
	}
	if failed != nil {
		return &vector.BatchError{Failed: failed}
	}
	return nil
}

// write sends canonical items in batches and returns those Weaviate
// refused, after deleting them again. An error means a request failed as a
// whole; any of its objects may have been written.
func (ix *Index) write(ctx context.Context, tenant string, items []vector.Item) ([]vector.ItemError, error) {
	var failed []vector.ItemError
	for chunk := range slices.Chunk(items, ix.cfg.BatchSize) {
		objs := make([]*models.Object, len(chunk))
		for i, it := range chunk {
			o, err := ix.object(tenant, it)
			if err != nil {
				return nil, fmt.Errorf("encoding item %q: %w", it.ID, err)
			}
			objs[i] = o
		}
		resp, err := ix.client.Batch().ObjectsBatcher().WithObjects(objs...).Do(ctx)
		if err != nil {
			return nil, fmt.Errorf("writing a batch of %d objects: %w", len(objs), err)
		}
		if len(resp) != len(objs) {
			return nil, fmt.Errorf("writing a batch of %d objects: weaviate answered for %d", len(objs), len(resp))
		}
		var refused []vector.Item
		for i, r := range resp {
			if r.ID != objs[i].ID {
				return nil, fmt.Errorf("writing a batch: result %d is for object %s, want %s", i, r.ID, objs[i].ID)
			}
			if err := resultError(r.Result); err != nil {
				failed = append(failed, vector.ItemError{Kind: chunk[i].Kind, ID: chunk[i].ID, Err: err})
				refused = append(refused, chunk[i])
			}
		}
		if len(refused) > 0 {
			if err := ix.deleteKeys(ctx, tenant, refused); err != nil {
				return nil, fmt.Errorf("deleting %d objects weaviate refused: %w", len(refused), err)
			}
		}
	}
	return failed, nil
}

func resultError(r *models.ObjectsGetResponseAO2Result) error {
	if r == nil {
		return errors.New("weaviate returned no result for the object")
	}
	var msgs []string
	if r.Errors != nil {
		for _, e := range r.Errors.Error {
			if e != nil {
				msgs = append(msgs, e.Message)
			}
		}
	}
	if r.Status != nil && *r.Status == models.ObjectsGetResponseAO2ResultStatusSUCCESS && len(msgs) == 0 {
		return nil
	}
	if len(msgs) == 0 {
		status := "unknown"
		if r.Status != nil {
			status = *r.Status
		}
		msgs = append(msgs, "status "+status)
	}
	return fmt.Errorf("weaviate refused the object: %s", strings.Join(msgs, "; "))
}

// object encodes a canonical item with a unit-length vector.
func (ix *Index) object(tenant string, it vector.Item) (*models.Object, error) {
	sources, err := json.Marshal(it.Sources)
	if err != nil {
		return nil, err
	}
	meta := ""
	if len(it.Metadata) > 0 {
		b, err := json.Marshal(it.Metadata)
		if err != nil {
			return nil, err
		}
		meta = string(b)
	}
	docKeys := make([]string, len(it.Sources))
	for i, s := range it.Sources {
		docKeys[i] = hash("doc", s.DocID)
	}
	props := map[string]any{
		"item_id":  it.ID,
		"item_key": hash("item", it.ID),
		"text":     it.Text,
		"doc_keys": docKeys,
		"sources":  string(sources),
		"metadata": meta,
	}
	for i, slot := range slots(it.Sources) {
		props[slotName(i)] = slot
	}
	return &models.Object{
		Class:      ix.classes[it.Kind],
		ID:         objectID(it.Kind, it.ID),
		Tenant:     tenant,
		Vector:     it.Vector,
		Properties: props,
	}, nil
}

var namespace = uuid.MustParse("6f1c7c3e-5b7a-4d0e-9b8e-6b2f3c1d9a4e")

func objectID(kind vector.Kind, id string) strfmt.UUID {
	return strfmt.UUID(uuid.NewSHA1(namespace, []byte(string(kind)+"\x00"+id)).String())
}

// hash is the filter token of a value: hex, so no tokenizer or quoting
// changes it.
func hash(scope, value string) string {
	sum := sha256.Sum256([]byte(scope + "\x00" + value))
	return hex.EncodeToString(sum[:16])
}

// Reader tokens. tokPublic is in every caller's tokens and every unused
// slot; tokNobody is in no caller's.
const (
	tokPublic = "public"
	tokNobody = "nobody"
)

func aclTokens(acl provenance.ACL) []string {
	if acl.Public {
		return []string{tokPublic}
	}
	var toks []string
	for _, p := range acl.Principals {
		toks = append(toks, hash("principal", p))
	}
	for _, g := range acl.Groups {
		toks = append(toks, hash("group", g))
	}
	if len(toks) == 0 {
		return []string{tokNobody}
	}
	sort.Strings(toks)
	return slices.Compact(toks)
}

func callerTokens(f vector.Filter) []string {
	toks := []string{tokPublic}
	if f.Principal != "" {
		toks = append(toks, hash("principal", f.Principal))
	}
	for _, g := range f.Groups {
		toks = append(toks, hash("group", g))
	}
	return toks
}

// slots encodes the conjunction of the sources' ACLs into Slots token
// lists (see the package doc).
func slots(sources []vector.Source) [][]string {
	var distinct [][]string
	for _, s := range sources {
		toks := aclTokens(s.ACL)
		if len(toks) == 1 && toks[0] == tokPublic {
			continue
		}
		if !slices.ContainsFunc(distinct, func(d []string) bool { return slices.Equal(d, toks) }) {
			distinct = append(distinct, toks)
		}
	}
	sort.Slice(distinct, func(i, j int) bool { return strings.Join(distinct[i], ",") < strings.Join(distinct[j], ",") })
	if len(distinct) > Slots {
		// Fold the surplus into the last slot: a token in every folded ACL.
		folded := distinct[Slots-1]
		for _, d := range distinct[Slots:] {
			folded = slices.DeleteFunc(slices.Clone(folded), func(tok string) bool { return !slices.Contains(d, tok) })
		}
		if len(folded) == 0 {
			folded = []string{tokNobody}
		}
		distinct = append(distinct[:Slots-1], folded)
	}
	out := make([][]string, Slots)
	for i := range out {
		if i < len(distinct) {
			out[i] = distinct[i]
		} else {
			out[i] = []string{tokPublic}
		}
	}
	return out
}

// deleteKeys deletes the given items (their kinds' collections only).
func (ix *Index) deleteKeys(ctx context.Context, tenant string, items []vector.Item) error {
	byKind := map[vector.Kind][]string{}
	for _, it := range items {
		byKind[it.Kind] = append(byKind[it.Kind], hash("item", it.ID))
	}
	for kind, keys := range byKind {
		where := filters.Where().WithPath([]string{"item_key"}).WithOperator(filters.ContainsAny).WithValueText(keys...)
		if err := ix.deleteWhere(ctx, kind, tenant, where); err != nil {
			return err
		}
	}
	return nil
}

// deleteWhere deletes every object of the kind's collection in tenant that
// matches where, in as many requests as Weaviate's per-request limit needs.
func (ix *Index) deleteWhere(ctx context.Context, kind vector.Kind, tenant string, where *filters.WhereBuilder) error {
	class := ix.classes[kind]
	for {
		resp, err := ix.client.Batch().ObjectsBatchDeleter().WithClassName(class).WithTenant(tenant).
			WithOutput("minimal").WithWhere(where).Do(ctx)
		if err != nil {
			return fmt.Errorf("deleting from %s: %w", class, err)
		}
		if resp.Results == nil {
			return fmt.Errorf("deleting from %s: weaviate returned no results", class)
		}
		if resp.Results.Failed > 0 {
			return fmt.Errorf("deleting from %s: %d of %d objects failed", class, resp.Results.Failed, resp.Results.Matches)
		}
		if resp.Results.Limit == 0 || resp.Results.Matches < resp.Results.Limit {
			return nil
		}
	}
}

// Delete removes the items with these ids, of kinds (every kind when none
// is given).
func (ix *Index) Delete(ctx context.Context, tenant string, ids []string, kinds ...vector.Kind) error {
	if err := ix.delete(ctx, tenant, ids, kinds); err != nil {
		return fmt.Errorf("deleting %d items from %q: %w", len(ids), tenant, err)
	}
	return nil
}

func (ix *Index) delete(ctx context.Context, tenant string, ids []string, kinds []vector.Kind) error {
	if ix.closed.Load() {
		return vector.ErrClosed
	}
	if err := vector.ValidateTenant(tenant); err != nil {
		return err
	}
	kinds, err := vector.ValidateKinds(kinds)
	if err != nil {
		return err
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		if err := vector.ValidateID(id); err != nil {
			return err
		}
		keys[i] = hash("item", id)
	}
	for _, kind := range kinds {
		ok, err := ix.hasTenant(ctx, kind, tenant)
		if err != nil || !ok {
			return err
		}
		for chunk := range slices.Chunk(keys, deleteChunk) {
			where := filters.Where().WithPath([]string{"item_key"}).WithOperator(filters.ContainsAny).WithValueText(chunk...)
			if err := ix.deleteWhere(ctx, kind, tenant, where); err != nil {
				return err
			}
		}
	}
	return nil
}

func docWhere(docID string) *filters.WhereBuilder {
	return filters.Where().WithPath([]string{"doc_keys"}).WithOperator(filters.ContainsAny).WithValueText(hash("doc", docID))
}

// DeleteByDoc removes every item of kinds (every kind when none is given)
// built from docID.
func (ix *Index) DeleteByDoc(ctx context.Context, tenant, docID string, kinds ...vector.Kind) error {
	err := func() error {
		if ix.closed.Load() {
			return vector.ErrClosed
		}
		if err := vector.ValidateTenant(tenant); err != nil {
			return err
		}
		if err := vector.ValidateDocID(docID); err != nil {
			return err
		}
		kinds, err := vector.ValidateKinds(kinds)
		if err != nil {
			return err
		}
		for _, kind := range kinds {
			ok, err := ix.hasTenant(ctx, kind, tenant)
			if err != nil || !ok {
				return err
			}
			if err := ix.deleteWhere(ctx, kind, tenant, docWhere(docID)); err != nil {
				return err
			}
		}
		return nil
	}()
	if err != nil {
		return fmt.Errorf("deleting the items of document %q from %q: %w", docID, tenant, err)
	}
	return nil
}

// PatchSources changes the sources of existing items (see
// vector.SourcePatch): each patched object is read with its vector and
// written again whole, its sources, document keys and ACL slots
// recomputed; nothing is embedded again. A patched object Weaviate refuses
// is deleted, as Upsert deletes one, so that no item is left with an ACL
// wider than the registry's; the error is a *vector.BatchError naming it,
// and the caller then writes the item whole again. Like UpdateACL, it
// relies on kgstream writing the items of one tenant one event at a time.
func (ix *Index) PatchSources(ctx context.Context, tenant string, patches []vector.SourcePatch) ([]bool, error) {
	applied, err := ix.patchSources(ctx, tenant, patches)
	if err != nil {
		return nil, fmt.Errorf("patching the sources of %d items in %q: %w", len(patches), tenant, err)
	}
	return applied, nil
}

func (ix *Index) patchSources(ctx context.Context, tenant string, patches []vector.SourcePatch) ([]bool, error) {
	if ix.closed.Load() {
		return nil, vector.ErrClosed
	}
	if err := vector.ValidatePatches(tenant, patches); err != nil {
		return nil, err
	}
	applied := make([]bool, len(patches))
	byKind := map[vector.Kind][]int{}
	for i, p := range patches {
		byKind[p.Kind] = append(byKind[p.Kind], i)
	}
	for _, kind := range vector.Kinds() {
		at := byKind[kind]
		if len(at) == 0 {
			continue
		}
		ok, err := ix.hasTenant(ctx, kind, tenant)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		for chunk := range slices.Chunk(at, ix.pageSize) {
			stored, err := ix.readItems(ctx, kind, tenant, chunk, patches)
			if err != nil {
				return nil, err
			}
			var write, drop []vector.Item
			var wrote []int
			for _, i := range chunk {
				p := patches[i]
				it, ok := stored[p.ID]
				if !ok || !p.Holds(it.Text, it.Metadata) {
					continue
				}
				it.Sources = p.PatchedSources(it.Sources)
				switch {
				case len(it.Sources) > vector.MaxSources:
					continue
				case len(it.Sources) == 0:
					drop = append(drop, it)
					applied[i] = true
				default:
					write = append(write, vector.Canonical(it))
					wrote = append(wrote, i)
				}
			}
			failed, err := ix.write(ctx, tenant, write)
			if err != nil {
				return nil, err
			}
			if failed != nil {
				return nil, &vector.BatchError{Failed: failed}
			}
			for _, i := range wrote {
				applied[i] = true
			}
			if len(drop) > 0 {
				if err := ix.deleteKeys(ctx, tenant, drop); err != nil {
					return nil, err
				}
			}
		}
	}
	return applied, nil
}

// readItems reads the stored items (with vectors) of the patches at, all
// of kind, by id.
func (ix *Index) readItems(ctx context.Context, kind vector.Kind, tenant string, at []int, patches []vector.SourcePatch) (map[string]vector.Item, error) {
	class := ix.classes[kind]
	keys := make([]string, len(at))
	for j, i := range at {
		keys[j] = hash("item", patches[i].ID)
	}
	where := filters.Where().WithPath([]string{"item_key"}).WithOperator(filters.ContainsAny).WithValueText(keys...)
	resp, err := ix.client.GraphQL().Get().WithClassName(class).WithTenant(tenant).WithWhere(where).
		WithLimit(len(keys)).WithFields(itemFields(true)...).Do(ctx)
	objs, err := objects(resp, err, class)
	if err != nil {
		return nil, fmt.Errorf("reading %d items of %s: %w", len(keys), class, err)
	}
	out := make(map[string]vector.Item, len(objs))
	for _, o := range objs {
		it, err := decodeItem(kind, o, true)
		if err != nil {
			return nil, fmt.Errorf("reading %d items of %s: %w", len(keys), class, err)
		}
		out[it.ID] = it
	}
	return out, nil
}

// UpdateACL rewrites every item built from docID with the new ACL, a page
// at a time. Items are rewritten whole (vector included), so an Upsert of
// the same item racing it may be overwritten; kgstream applies one event
// per document at a time, which rules that out.
func (ix *Index) UpdateACL(ctx context.Context, tenant, docID string, acl provenance.ACL) error {
	err := func() error {
		if ix.closed.Load() {
			return vector.ErrClosed
		}
		if err := vector.ValidateTenant(tenant); err != nil {
			return err
		}
		if err := vector.ValidateDocID(docID); err != nil {
			return err
		}
		acl = vector.NormalizeACL(acl)
		for _, kind := range vector.Kinds() {
			ok, err := ix.hasTenant(ctx, kind, tenant)
			if err != nil || !ok {
				return err
			}
			if err := ix.updateACL(ctx, kind, tenant, docID, acl); err != nil {
				return err
			}
		}
		return nil
	}()
	if err != nil {
		return fmt.Errorf("updating the ACL of document %q in %q: %w", docID, tenant, err)
	}
	return nil
}

func (ix *Index) updateACL(ctx context.Context, kind vector.Kind, tenant, docID string, acl provenance.ACL) error {
	class := ix.classes[kind]
	after := ""
	for {
		where := docWhere(docID)
		if after != "" {
			where = filters.Where().WithOperator(filters.And).WithOperands([]*filters.WhereBuilder{
				where,
				filters.Where().WithPath([]string{"item_key"}).WithOperator(filters.GreaterThan).WithValueText(after),
			})
		}
		resp, err := ix.client.GraphQL().Get().WithClassName(class).WithTenant(tenant).WithWhere(where).
			WithSort(graphql.Sort{Path: []string{"item_key"}, Order: graphql.Asc}).WithLimit(ix.pageSize).
			WithFields(itemFields(true)...).Do(ctx)
		objs, err := objects(resp, err, class)
		if err != nil {
			return fmt.Errorf("reading the items of document %q: %w", docID, err)
		}
		if len(objs) == 0 {
			return nil
		}
		items := make([]vector.Item, len(objs))
		for i, o := range objs {
			it, err := decodeItem(kind, o, true)
			if err != nil {
				return fmt.Errorf("reading the items of document %q: %w", docID, err)
			}
			for j := range it.Sources {
				if it.Sources[j].DocID == docID {
					it.Sources[j].ACL = acl
				}
			}
			items[i] = it
			key, _ := o["item_key"].(string)
			after = key
		}
		failed, err := ix.write(ctx, tenant, items)
		if err != nil {
			return err
		}
		if failed != nil {
			return &vector.BatchError{Failed: failed}
		}
		if len(objs) < ix.pageSize {
			return nil
		}
	}
}

// ScanSources reports the sources of docID's items (every item of the
// tenant when docID is ""), a page at a time in item_key order, kind by
// kind. Objects written meanwhile may or may not be reported.
func (ix *Index) ScanSources(ctx context.Context, tenant, docID string, fn func(vector.ItemSources) error) error {
	if ix.closed.Load() {
		return vector.ErrClosed
	}
	if err := vector.ValidateScan(tenant, docID); err != nil {
		return fmt.Errorf("scanning the items of %q: %w", tenant, err)
	}
	for _, kind := range vector.Kinds() {
		ok, err := ix.hasTenant(ctx, kind, tenant)
		if err != nil {
			return fmt.Errorf("scanning the items of %q: %w", tenant, err)
		}
		if !ok {
			continue
		}
		if err := ix.scanKind(ctx, kind, tenant, docID, fn); err != nil {
			return err
		}
	}
	return nil
}

// scanKind pages through the kind's objects of tenant (docID's when not
// ""), keyset-paged on item_key so no offset limit applies.
func (ix *Index) scanKind(ctx context.Context, kind vector.Kind, tenant, docID string, fn func(vector.ItemSources) error) error {
	class := ix.classes[kind]
	after := ""
	for {
		var conds []*filters.WhereBuilder
		if docID != "" {
			conds = append(conds, docWhere(docID))
		}
		if after != "" {
			conds = append(conds, filters.Where().WithPath([]string{"item_key"}).WithOperator(filters.GreaterThan).WithValueText(after))
		}
		get := ix.client.GraphQL().Get().WithClassName(class).WithTenant(tenant).
			WithSort(graphql.Sort{Path: []string{"item_key"}, Order: graphql.Asc}).WithLimit(ix.pageSize).
			WithFields(graphql.Field{Name: "item_id"}, graphql.Field{Name: "item_key"}, graphql.Field{Name: "sources"})
		switch len(conds) {
		case 1:
			get = get.WithWhere(conds[0])
		case 2:
			get = get.WithWhere(filters.Where().WithOperator(filters.And).WithOperands(conds))
		}
		resp, err := get.Do(ctx)
		objs, err := objects(resp, err, class)
		if err != nil {
			return fmt.Errorf("scanning %s of %q: %w", class, tenant, err)
		}
		for _, o := range objs {
			id, _ := o["item_id"].(string)
			var srcs []vector.Source
			raw, _ := o["sources"].(string)
			if err := json.Unmarshal([]byte(raw), &srcs); err != nil {
				return fmt.Errorf("decoding the sources of %q: %w", id, err)
			}
			if err := fn(vector.ItemSources{Kind: kind, ID: id, Sources: srcs}); err != nil {
				return err
			}
			after, _ = o["item_key"].(string)
		}
		if len(objs) < ix.pageSize {
			return nil
		}
	}
}

// --- search ----------------------------------------------------------------

// Search ranks the admitted items of tenant and kind by cosine similarity;
// the ACL is part of the near-vector query's where filter.
func (ix *Index) Search(ctx context.Context, tenant string, kind vector.Kind, v []float32, k int, f vector.Filter) ([]vector.Hit, error) {
	hits, err := ix.search(ctx, tenant, kind, v, k, f)
	if err != nil {
		return nil, fmt.Errorf("searching %s items of %q: %w", kind, tenant, err)
	}
	return hits, nil
}

func (ix *Index) search(ctx context.Context, tenant string, kind vector.Kind, v []float32, k int, f vector.Filter) ([]vector.Hit, error) {
	if ix.closed.Load() {
		return nil, vector.ErrClosed
	}
	if err := vector.ValidateSearch(tenant, kind, v, k); err != nil {
		return nil, err
	}
	ok, err := ix.hasTenant(ctx, kind, tenant)
	if err != nil || !ok {
		return nil, err
	}
	class := ix.classes[kind]
	if d, ok := ix.dims.Load(cacheKey(class, tenant)); ok && d.(int) != len(v) {
		return nil, fmt.Errorf("%w: query has %d dimensions, %s items have %d", vector.ErrInvalid, len(v), kind, d)
	}
	toks := callerTokens(f)
	conds := make([]*filters.WhereBuilder, Slots)
	for i := range conds {
		conds[i] = filters.Where().WithPath([]string{slotName(i)}).WithOperator(filters.ContainsAny).WithValueText(toks...)
	}
	where := filters.Where().WithOperator(filters.And).WithOperands(conds)
	near := ix.client.GraphQL().NearVectorArgBuilder().WithVector(vector.Normalize(v))
	resp, err := ix.client.GraphQL().Get().WithClassName(class).WithTenant(tenant).WithNearVector(near).
		WithWhere(where).WithLimit(k).WithFields(itemFields(false)...).Do(ctx)
	objs, err := objects(resp, err, class)
	if err != nil {
		return nil, err
	}
	hits := make([]vector.Hit, 0, len(objs))
	for _, o := range objs {
		it, err := decodeItem(kind, o, false)
		if err != nil {
			return nil, err
		}
		if !it.ReadableBy(f) {
			// The slots admitted what the exact sources do not: the object
			// was written by something other than this adapter.
			ix.log.Warn("weaviate returned an item the caller may not read; dropped", "collection", class, "tenant", tenant, "item", it.ID)
			continue
		}
		dist, ok := additional(o)["distance"].(float64)
		if !ok {
			return nil, fmt.Errorf("hit %q has no distance", it.ID)
		}
		hits = append(hits, vector.Hit{Item: it, Score: float32(1 - dist)})
	}
	sort.SliceStable(hits, func(i, j int) bool {
		if hits[i].Score != hits[j].Score {
			return hits[i].Score > hits[j].Score
		}
		return hits[i].ID < hits[j].ID
	})
	return hits, nil
}

// --- decoding --------------------------------------------------------------

func itemFields(withVector bool) []graphql.Field {
	add := []graphql.Field{{Name: "distance"}}
	if withVector {
		add = []graphql.Field{{Name: "vector"}}
	}
	return []graphql.Field{
		{Name: "item_id"}, {Name: "item_key"}, {Name: "text"}, {Name: "sources"}, {Name: "metadata"},
		{Name: "_additional", Fields: add},
	}
}

// objects extracts the objects of class from a GraphQL Get answer.
func objects(resp *models.GraphQLResponse, err error, class string) ([]map[string]any, error) {
	if err != nil {
		return nil, err
	}
	if len(resp.Errors) > 0 {
		msgs := make([]string, len(resp.Errors))
		for i, e := range resp.Errors {
			msgs[i] = e.Message
		}
		return nil, fmt.Errorf("weaviate: %s", strings.Join(msgs, "; "))
	}
	get, ok := resp.Data["Get"].(map[string]any)
	if !ok {
		return nil, errors.New("weaviate answered without Get")
	}
	raw, _ := get[class].([]any)
	out := make([]map[string]any, len(raw))
	for i, r := range raw {
		o, ok := r.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("weaviate answered a %T for an object", r)
		}
		out[i] = o
	}
	return out, nil
}

func additional(o map[string]any) map[string]any {
	a, _ := o["_additional"].(map[string]any)
	return a
}

func floats(v any) ([]float32, error) {
	raw, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("vector is a %T", v)
	}
	out := make([]float32, len(raw))
	for i, x := range raw {
		f, ok := x.(float64)
		if !ok {
			return nil, fmt.Errorf("vector component is a %T", x)
		}
		out[i] = float32(f)
	}
	return out, nil
}

func decodeItem(kind vector.Kind, o map[string]any, withVector bool) (vector.Item, error) {
	id, _ := o["item_id"].(string)
	text, _ := o["text"].(string)
	it := vector.Item{ID: id, Kind: kind, Text: text}
	sources, _ := o["sources"].(string)
	if err := json.Unmarshal([]byte(sources), &it.Sources); err != nil {
		return vector.Item{}, fmt.Errorf("decoding the sources of %q: %w", id, err)
	}
	if meta, _ := o["metadata"].(string); meta != "" {
		if err := json.Unmarshal([]byte(meta), &it.Metadata); err != nil {
			return vector.Item{}, fmt.Errorf("decoding the metadata of %q: %w", id, err)
		}
	}
	if withVector {
		v, err := floats(additional(o)["vector"])
		if err != nil {
			return vector.Item{}, fmt.Errorf("decoding the vector of %q: %w", id, err)
		}
		it.Vector = v
	}
	return it, nil
}

func isStatus(err error, code int) bool {
	var we *fault.WeaviateClientError
	return errors.As(err, &we) && we.StatusCode == code
}
