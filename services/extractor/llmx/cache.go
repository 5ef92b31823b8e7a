package llmx

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/kgstream/kgstream/pkg/events"
)

// Cache stores extraction results by key. Implementations: LRUCache (in
// process) and the redis subpackage (shared by every extractor replica).
// A Get error is treated as a miss; a Set error is logged, not returned:
// the cache saves money, it is never needed for correctness.
type Cache interface {
	Get(ctx context.Context, key string) ([]byte, bool, error)
	Set(ctx context.Context, key string, value []byte) error
}

// DefaultPromptVersion is the version of the extraction prompt. Change it
// (or Config.PromptVersion) whenever the prompt's wording changes: the
// cache key includes it, so every text unit is extracted afresh.
const DefaultPromptVersion = "extract-v1"

// CacheKey is what an LLM extraction of one text unit depends on.
type CacheKey struct {
	// ContentHash is chunk.ContentHash of the unit's text.
	ContentHash string
	// Subject is what the prompt says about the document besides the unit
	// text (its id, type and title): two documents sharing a paragraph
	// must not share a document entity.
	Subject       string
	PromptVersion string
	// EntityTypes are the types asked for; order does not matter.
	EntityTypes []string
	Relations   []string
	Model       string
	Gleanings   int
}

// String is the key's cache key: a hash of every field.
func (k CacheKey) String() string {
	types := slices.Clone(k.EntityTypes)
	slices.Sort(types)
	rels := slices.Clone(k.Relations)
	slices.Sort(rels)
	h := sha256.New()
	for _, f := range []string{k.ContentHash, k.Subject, k.PromptVersion, strings.Join(types, ","),
		strings.Join(rels, ","), k.Model, fmt.Sprint(k.Gleanings)} {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	return "extract:" + hex.EncodeToString(h.Sum(nil))
}

// cachedUnit is a unit's extraction without its provenance (unit ids
// change with the version, spans with the unit's place in the document;
// the extraction of unchanged text does not).
type cachedUnit struct {
	Entities      []events.RawEntity       `json:"entities"`
	Relationships []events.RawRelationship `json:"relationships"`
}

func encodeUnit(ents []events.RawEntity, rels []events.RawRelationship) ([]byte, error) {
	c := cachedUnit{Entities: slices.Clone(ents), Relationships: slices.Clone(rels)}
	for i := range c.Entities {
		c.Entities[i].TextUnit = ""
	}
	for i := range c.Relationships {
		r := &c.Relationships[i]
		r.TextUnit, r.SentenceStart, r.SentenceEnd, r.UnitHash = "", 0, 0, ""
	}
	return json.Marshal(c)
}

func decodeUnit(data []byte, unit string) ([]events.RawEntity, []events.RawRelationship, error) {
	var c cachedUnit
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, nil, fmt.Errorf("decoding a cached extraction: %w", err)
	}
	for i := range c.Entities {
		c.Entities[i].TextUnit = unit
	}
	for i := range c.Relationships {
		c.Relationships[i].TextUnit = unit
	}
	return c.Entities, c.Relationships, nil
}

// LRUCache is an in-process Cache holding the most recently used entries.
// It is safe for concurrent use.
type LRUCache struct {
	mu    sync.Mutex
	cap   int
	order *list.List // front: most recent
	items map[string]*list.Element
}

type lruEntry struct {
	key   string
	value []byte
}

var _ Cache = (*LRUCache)(nil)

// NewLRUCache returns a cache of at most capacity entries (default 10000).
func NewLRUCache(capacity int) *LRUCache {
	if capacity <= 0 {
		capacity = 10000
	}
	return &LRUCache{cap: capacity, order: list.New(), items: map[string]*list.Element{}}
}

// Get implements Cache.
func (c *LRUCache) Get(_ context.Context, key string) ([]byte, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		return nil, false, nil
	}
	c.order.MoveToFront(el)
	return slices.Clone(el.Value.(*lruEntry).value), true, nil
}

// Set implements Cache.
func (c *LRUCache) Set(_ context.Context, key string, value []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		el.Value.(*lruEntry).value = slices.Clone(value)
		c.order.MoveToFront(el)
		return nil
	}
	c.items[key] = c.order.PushFront(&lruEntry{key: key, value: slices.Clone(value)})
	for c.order.Len() > c.cap {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*lruEntry).key)
	}
	return nil
}

// Len returns the number of entries.
func (c *LRUCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
