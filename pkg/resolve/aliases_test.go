package resolve

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAliases(t *testing.T) {
	a, err := ParseAliases([]byte(`
aliases:
  - type: component
    canonical: cert-manager
    mentions: [certificate manager, Cert Manager]
  - tenant: acme
    type: service
    canonical: checkout-api
    mentions: [checkout]
`))
	if err != nil {
		t.Fatal(err)
	}
	if ck, ok := a.Canonical("any", "component", Key("Certificate-Manager")); !ok || ck != "certmanager" {
		t.Fatalf("global alias: %q %v", ck, ok)
	}
	if _, ok := a.Canonical("other", "service", "checkout"); ok {
		t.Fatal("a tenant's alias leaked to another tenant")
	}
	if ck, ok := a.Canonical("acme", "service", "checkout"); !ok || ck != "checkoutapi" {
		t.Fatalf("tenant alias: %q %v", ck, ok)
	}
	if _, ok := a.Canonical("acme", "team", "checkout"); ok {
		t.Fatal("an alias crossed types")
	}
	if a.Len() != 2 {
		t.Fatalf("Len = %d (the same-key mention is not a mapping)", a.Len())
	}
}

func TestAliasConflictRejected(t *testing.T) {
	_, err := ParseAliases([]byte(`
aliases:
  - {type: service, canonical: a, mentions: [x]}
  - {type: service, canonical: b, mentions: [x]}
`))
	if !errors.Is(err, ErrInvalidAliases) {
		t.Fatalf("got %v", err)
	}
	for _, bad := range []string{"aliases: [", "aliases:\n  - {canonical: a, mentions: [b]}"} {
		if _, err := ParseAliases([]byte(bad)); !errors.Is(err, ErrInvalidAliases) {
			t.Fatalf("%q: got %v", bad, err)
		}
	}
}

func TestAliasWatcherReloads(t *testing.T) {
	p := filepath.Join(t.TempDir(), "aliases.yaml")
	write := func(s string, mt time.Time) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	base := time.Now().Add(-time.Hour)
	write("aliases:\n  - {type: service, canonical: a, mentions: [x]}\n", base)
	w, err := NewAliasWatcher(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	write("aliases: [", base.Add(time.Minute))
	if _, err := w.reload(); err == nil {
		t.Fatal("a bad edit was accepted")
	}
	if ck, _ := w.Current().Canonical("t", "service", "x"); ck != "a" {
		t.Fatalf("a bad edit replaced the table: %q", ck)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx, 5*time.Millisecond)
	write("aliases:\n  - {type: service, canonical: b, mentions: [x]}\n", base.Add(2*time.Minute))
	deadline := time.Now().Add(5 * time.Second)
	for {
		if ck, _ := w.Current().Canonical("t", "service", "x"); ck == "b" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("alias table not reloaded")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := NewAliasWatcher(filepath.Join(t.TempDir(), "missing.yaml"), nil); err == nil {
		t.Fatal("a missing alias file was accepted at start")
	}
}

func TestSplits(t *testing.T) {
	a, err := ParseAliases([]byte(`
splits:
  - {type: component, mention: Cert Manager, as: cert manager (legacy)}
  - {tenant: acme, type: service, mention: API, as: public api}
`))
	if err != nil {
		t.Fatal(err)
	}
	if as, ok := a.Split("x", "component", "  cert manager "); !ok || as != "certmanagerlegacy" {
		t.Fatalf("split: %q %v", as, ok)
	}
	if _, ok := a.Split("x", "component", "cert-manager"); ok {
		t.Fatal("a split matched another spelling of the same key")
	}
	if _, ok := a.Split("other", "service", "API"); ok {
		t.Fatal("a tenant's split leaked")
	}
	if _, err := ParseAliases([]byte("splits:\n  - {type: service, mention: x}\n")); !errors.Is(err, ErrInvalidAliases) {
		t.Fatalf("split without as: %v", err)
	}
}

// TestAliasUnknownKeysRefused: a misspelt key is refused with the key named,
// at the top level and inside entries, instead of dropping the rule.
func TestAliasUnknownKeysRefused(t *testing.T) {
	for bad, key := range map[string]string{
		"aliases:\n  - {type: service, canonical: a, mention: [b]}\n": "mention",
		"alias:\n  - {type: service, canonical: a, mentions: [b]}\n":  "alias",
		"splits:\n  - {type: service, mention: a, to: b}\n":           "to",
	} {
		_, err := ParseAliases([]byte(bad))
		if !errors.Is(err, ErrInvalidAliases) || !strings.Contains(err.Error(), "field "+key+" not found") {
			t.Fatalf("%q: got %v, want an error naming %q", bad, err, key)
		}
	}
	for _, ok := range []string{"", "# nothing yet\n", "aliases: []\n"} {
		if _, err := ParseAliases([]byte(ok)); err != nil {
			t.Fatalf("%q: %v", ok, err)
		}
	}
}

// Refresh (called by resolvers) and Run's polling reload concurrently; the
// race detector (make test) sees any unguarded state.
func TestAliasWatcherRefreshWhilePolling(t *testing.T) {
	p := filepath.Join(t.TempDir(), "aliases.yaml")
	if err := os.WriteFile(p, []byte("aliases:\n  - {type: service, canonical: a, mentions: [x]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := NewAliasWatcher(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx, time.Millisecond) }()
	base := time.Now().Add(-time.Hour)
	for i := range 50 {
		canonical := []string{"a", "b"}[i%2]
		if err := os.WriteFile(p, []byte("aliases:\n  - {type: service, canonical: "+canonical+", mentions: [x]}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		mt := base.Add(time.Duration(i) * time.Second)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
		if err := w.Refresh(); err != nil {
			t.Fatal(err)
		}
		if ck, _ := w.Current().Canonical("t", "service", "x"); ck != canonical {
			t.Fatalf("after Refresh: %q, want %q", ck, canonical)
		}
	}
	cancel()
	<-done
}
