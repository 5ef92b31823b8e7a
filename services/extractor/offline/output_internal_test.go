package offline

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/resolve"
)

// TestMentionDescriptionIsTheFormat: the mention description built by
// concatenation is what "%s mentions %q" formats, for texts with quotes,
// backslashes, control bytes, runes outside ASCII and invalid UTF-8.
func TestMentionDescriptionIsTheFormat(t *testing.T) {
	for _, s := range []string{"", "cert-manager", `say "hi"`, `a\b`, "tab\there", "new\nline", "caf\u00e9", "\u2028",
		"\xff\xfe", "`raw`", "emoji \U0001F600", "\x00", "\u00a0nbsp"} {
		if got, want := "PM-1"+" mentions "+strconv.Quote(s), fmt.Sprintf("%s mentions %q", "PM-1", s); got != want {
			t.Fatalf("%q: %q, want %q", s, got, want)
		}
	}
}

// TestOutputKeysRelationshipsBySourceAsGiven: a source remembered from the
// relationship before does not stand for another: relationships of
// alternating sources to one target are each kept once, and each pair is
// related.
func TestOutputKeysRelationshipsBySourceAsGiven(t *testing.T) {
	o := NewOutput()
	rel := func(st, s string) events.RawRelationship {
		return events.RawRelationship{Source: s, SourceType: st, Relation: "uses", Target: "Kafka", TargetType: "component", TextUnit: "u1"}
	}
	for i, r := range []events.RawRelationship{rel("service", "A"), rel("service", "B"), rel("service", "A"),
		rel("component", "A"), rel("service", "B"), rel("service", "a")} {
		o.Relationship(r)
		_, rels := o.Result()
		if want := []int{1, 2, 2, 3, 3, 3}[i]; len(rels) != want {
			t.Fatalf("after %d relationships, %d kept, want %d: %v", i+1, len(rels), want, rels)
		}
	}
	for _, src := range []string{"service:a", "service:b", "component:a"} {
		if !o.Related(src, "component:kafka") {
			t.Fatalf("%s is not related to component:kafka", src)
		}
	}
}

// TestOutputIDsAreResolveIDs: the output's ids, their types' spellings
// remembered, are resolve.ID's and EntityID's, for types and names of
// every shape, each asked for twice and in turn with the others.
func TestOutputIDsAreResolveIDs(t *testing.T) {
	types := []string{"component", "Component", " component ", "failure_mode", "Failure Mode", "failure-mode", "", "_",
		"a__b", "Ünïcode", "team/group", "a:b", "mentions", "MENTIONS", "caused by", "\u00a0x", "x1"}
	names := []string{"Kafka", "cert-manager", "Cert Manager", "", " ", "DNS Servers", "caf\u00e9", "a:b", "policies", "K8s"}
	o := NewOutput()
	for range 2 {
		for _, typ := range types {
			for _, name := range names {
				if got, want := o.id(typ, name), resolve.ID(typ, name); got != want {
					t.Fatalf("id(%q, %q) = %q, resolve.ID %q", typ, name, got, want)
				}
				for _, e := range []events.RawEntity{{Type: typ, Name: name}, {Type: typ, Name: "x", Key: name}} {
					if got, want := o.entityID(e), EntityID(e); got != want {
						t.Fatalf("entityID(%+v) = %q, EntityID %q", e, got, want)
					}
				}
				if got, want := o.typeOf(name), resolve.Type(name); got != want {
					t.Fatalf("typeOf(%q) = %q, resolve.Type %q", name, got, want)
				}
			}
		}
	}
}
