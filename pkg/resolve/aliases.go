package resolve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kgstream/kgstream/pkg/errkind"
	"gopkg.in/yaml.v3"
)

// ErrInvalidAliases means an alias file could not be used.
var ErrInvalidAliases = errkind.New(errkind.Invalid, "invalid alias table")

// AliasEntry maps mentions to one canonical entity. The file is reviewed by
// people, so it names entities the way they are spelt, not by their keys.
type AliasEntry struct {
	// Tenant limits the entry to one tenant; empty applies to every tenant.
	Tenant string `yaml:"tenant,omitempty"`
	// Type is the entity type of the canonical entity and its mentions.
	Type string `yaml:"type"`
	// Canonical names the entity the mentions resolve to.
	Canonical string `yaml:"canonical"`
	// Mentions are the other names of the same entity.
	Mentions []string `yaml:"mentions"`
}

// SplitEntry undoes a wrong merge: mentions spelt exactly Mention (case and
// surrounding space aside) of type Type resolve to As instead of whatever
// their normalisation key would merge them into.
type SplitEntry struct {
	Tenant  string `yaml:"tenant,omitempty"`
	Type    string `yaml:"type"`
	Mention string `yaml:"mention"`
	As      string `yaml:"as"`
}

// AliasFile is the YAML document of an alias table:
//
//	aliases:
//	  - type: component
//	    canonical: cert-manager
//	    mentions: [certificate manager, jetstack issuer]
//	  - tenant: acme
//	    type: service
//	    canonical: checkout-api
//	    mentions: [checkout]
//
//	splits:
//	  - type: component
//	    mention: Cert Manager
//	    as: cert manager (legacy)
type AliasFile struct {
	Aliases []AliasEntry `yaml:"aliases"`
	Splits  []SplitEntry `yaml:"splits,omitempty"`
}

// Aliases is an immutable alias table: (tenant, type, mention key) to the
// canonical key. Tenant-specific entries win over global ones.
type Aliases struct {
	byKey  map[aliasKey]string
	splits map[aliasKey]string // key: exact lower-cased spelling
	n      int
}

type aliasKey struct{ tenant, typ, key string }

// ParseAliases parses and validates an alias table. A mention listed for two
// different canonical entities of one type is an error: a reviewer must
// decide, the resolver will not guess.
func ParseAliases(data []byte) (*Aliases, error) {
	var f AliasFile
	// Strict: a misspelt key ("mention:" for "mentions:") would otherwise
	// drop a reviewed rule without a word. yaml.v3 names the key and line.
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %v", ErrInvalidAliases, err)
	}
	a := &Aliases{byKey: map[aliasKey]string{}, splits: map[aliasKey]string{}}
	for i, e := range f.Aliases {
		t := Type(e.Type)
		ck := Key(e.Canonical)
		if t == "" || ck == "" {
			return nil, fmt.Errorf("%w: entry %d: type and canonical are required", ErrInvalidAliases, i)
		}
		for _, m := range e.Mentions {
			mk := Key(m)
			if mk == "" {
				return nil, fmt.Errorf("%w: entry %d: empty mention", ErrInvalidAliases, i)
			}
			if mk == ck {
				continue // already the same key
			}
			k := aliasKey{e.Tenant, t, mk}
			if prev, ok := a.byKey[k]; ok && prev != ck {
				return nil, fmt.Errorf("%w: entry %d: mention %q of type %s maps to both %q and %q",
					ErrInvalidAliases, i, m, t, prev, ck)
			}
			a.byKey[k] = ck
			a.n++
		}
	}
	for i, e := range f.Splits {
		t, m, as := Type(e.Type), spelling(e.Mention), Key(e.As)
		if t == "" || m == "" || as == "" {
			return nil, fmt.Errorf("%w: split %d: type, mention and as are required", ErrInvalidAliases, i)
		}
		k := aliasKey{e.Tenant, t, m}
		if prev, ok := a.splits[k]; ok && prev != as {
			return nil, fmt.Errorf("%w: split %d: mention %q of type %s splits to both %q and %q", ErrInvalidAliases, i, e.Mention, t, prev, as)
		}
		a.splits[k] = as
		a.n++
	}
	return a, nil
}

func spelling(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// Split returns the key a mention spelt exactly name resolves to when a
// split rule separates it, and whether one does.
func (a *Aliases) Split(tenant, typ, name string) (string, bool) {
	if a == nil {
		return "", false
	}
	k := spelling(name)
	if as, ok := a.splits[aliasKey{tenant, typ, k}]; ok {
		return as, true
	}
	as, ok := a.splits[aliasKey{"", typ, k}]
	return as, ok
}

// CanonicalKey is the key a mention of type typ spelt name (normalisation
// key key) resolves to under the table: a split rule for the exact
// spelling, else an alias of the key, else the key itself. reviewed says
// whether the table decided; the resolver and the query service both
// resolve through it, so a reference and a mention always agree.
func (a *Aliases) CanonicalKey(tenant, typ, name, key string) (ck string, reviewed bool) {
	if as, ok := a.Split(tenant, typ, name); ok {
		return as, true
	}
	if ck, ok := a.Canonical(tenant, typ, key); ok {
		return ck, true
	}
	return key, false
}

// Len returns the number of mention mappings.
func (a *Aliases) Len() int {
	if a == nil {
		return 0
	}
	return a.n
}

// Canonical returns the canonical key of a mention key of type typ in
// tenant, and whether the table maps it.
func (a *Aliases) Canonical(tenant, typ, key string) (string, bool) {
	if a == nil {
		return "", false
	}
	if ck, ok := a.byKey[aliasKey{tenant, typ, key}]; ok {
		return ck, true
	}
	ck, ok := a.byKey[aliasKey{"", typ, key}]
	return ck, ok
}

// AliasWatcher holds the current alias table of a file and reloads it when
// the file changes. A file that fails to parse keeps the previous table and
// is logged, so a bad edit never empties the table.
type AliasWatcher struct {
	path string
	log  *slog.Logger
	cur  atomic.Pointer[Aliases]
	// mu serialises reloads: Run polls while resolvers call Refresh.
	mu      sync.Mutex
	modTime time.Time
	size    int64
}

// NewAliasWatcher loads path (empty path: no aliases). The first load must
// succeed.
func NewAliasWatcher(path string, log *slog.Logger) (*AliasWatcher, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &AliasWatcher{path: path, log: log}
	w.cur.Store(&Aliases{byKey: map[aliasKey]string{}, splits: map[aliasKey]string{}})
	if path == "" {
		return w, nil
	}
	if _, err := w.reload(); err != nil {
		return nil, err
	}
	return w, nil
}

// Current returns the table in force.
func (w *AliasWatcher) Current() *Aliases {
	if w == nil {
		return nil
	}
	return w.cur.Load()
}

func (w *AliasWatcher) reload() (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fi, err := os.Stat(w.path)
	if err != nil {
		return false, fmt.Errorf("reading alias file: %w", err)
	}
	if fi.ModTime().Equal(w.modTime) && fi.Size() == w.size {
		return false, nil
	}
	data, err := os.ReadFile(w.path)
	if err != nil {
		return false, fmt.Errorf("reading alias file: %w", err)
	}
	a, err := ParseAliases(data)
	if err != nil {
		return false, fmt.Errorf("loading %s: %w", w.path, err)
	}
	w.cur.Store(a)
	w.modTime, w.size = fi.ModTime(), fi.Size()
	w.log.Info("alias table loaded", "path", w.path, "mentions", a.Len())
	return true, nil
}

// Refresh reloads the file now if it changed (a re-resolution must see the
// table that asked for it, not wait for the next poll).
func (w *AliasWatcher) Refresh() error {
	if w == nil || w.path == "" {
		return nil
	}
	_, err := w.reload()
	return err
}

// Path is the watched file ("" when none).
func (w *AliasWatcher) Path() string {
	if w == nil {
		return ""
	}
	return w.path
}

// Run polls the file every interval until ctx is done. Polling (not inotify)
// also follows files replaced by a rename, as config maps are.
func (w *AliasWatcher) Run(ctx context.Context, interval time.Duration) error {
	if w.path == "" {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if _, err := w.reload(); err != nil {
				w.log.Error("alias table not reloaded, keeping the previous one", "error", err)
			}
		}
	}
}
