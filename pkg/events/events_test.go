package events

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kgstream/kgstream/pkg/provenance"
)

func validDoc() *DocChanged {
	return &DocChanged{Header: Header{Tenant: "acme"}, DocID: "INC-1", Version: 1, Text: "hello",
		ACL: provenance.PublicACL(), ReceivedAt: time.Unix(1700000000, 0).UTC()}
}

func TestRoundTrip(t *testing.T) {
	data, err := Encode(validDoc())
	if err != nil {
		t.Fatal(err)
	}
	var got DocChanged
	if err := Decode(data, &got); err != nil {
		t.Fatal(err)
	}
	if got.Schema != SchemaVersion || got.DocID != "INC-1" || got.Text != "hello" {
		t.Fatalf("round trip lost data: %+v", got)
	}
}

func TestDecodeRejects(t *testing.T) {
	good, _ := Encode(validDoc())
	cases := map[string]string{
		"malformed":      `{"schema":1,`,
		"unknown schema": strings.Replace(string(good), `"schema":1`, `"schema":99`, 1),
		"unknown field":  strings.Replace(string(good), `"schema":1`, `"schema":1,"bogus":true`, 1),
		"wrong type":     strings.Replace(string(good), `"version":1`, `"version":"one"`, 1),
		"bad tenant":     strings.Replace(string(good), `"tenant":"acme"`, `"tenant":"Acme Corp"`, 1),
		"no doc id":      strings.Replace(string(good), `"doc_id":"INC-1"`, `"doc_id":""`, 1),
		"zero version":   strings.Replace(string(good), `"version":1`, `"version":0`, 1),
		"empty text":     strings.Replace(string(good), `"text":"hello"`, `"text":"  "`, 1),
		"trailing":       string(good) + `{}`,
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			var ev DocChanged
			err := Decode([]byte(in), &ev)
			if !errors.Is(err, ErrInvalidEvent) {
				t.Fatalf("got %v, want ErrInvalidEvent", err)
			}
		})
	}
}

func TestEncodeRefusesInvalid(t *testing.T) {
	ev := validDoc()
	ev.DocID = ""
	if _, err := Encode(ev); !errors.Is(err, ErrInvalidEvent) {
		t.Fatalf("got %v, want ErrInvalidEvent", err)
	}
}

func TestExtractedTextUnitsChecked(t *testing.T) {
	ev := &Extracted{Header: Header{Tenant: "acme"}, DocID: "d", Version: 1,
		TextUnits:     []TextUnit{{ID: "u1", Text: "x"}},
		Relationships: []RawRelationship{{Source: "a", SourceType: "t", Relation: "r", Target: "b", TargetType: "t", TextUnit: "u2"}}}
	if _, err := Encode(ev); err == nil || !strings.Contains(err.Error(), "unknown text unit") {
		t.Fatalf("got %v, want unknown text unit", err)
	}
}

func TestSubjects(t *testing.T) {
	s := Subjects{Prefix: "kg"}
	if got := s.For(KindDocChanged, "acme"); got != "kg.doc.changed.acme" {
		t.Fatal(got)
	}
	k, tenant, err := s.Parse("kg.communities.changed.acme")
	if err != nil || k != KindCommunitiesChanged || tenant != "acme" {
		t.Fatal(k, tenant, err)
	}
	if _, _, err := s.Parse("other.doc.changed.acme"); err == nil {
		t.Fatal("foreign prefix accepted")
	}
	if got := MsgID("acme", "INC-1", 3, "changed"); got != "acme/INC-1/3/changed" {
		t.Fatal(got)
	}
}

// TestMessageIDsArePinned: stored streams de-duplicate on these exact
// strings, so every kind's id must stay what it was.
func TestMessageIDsArePinned(t *testing.T) {
	for _, c := range []struct{ name, got, want string }{
		{"changed", ChangedID("acme", "INC-1", 3), "acme/INC-1/3/changed"},
		{"changed, id with slashes", ChangedID("acme", "github:o/r#1/comment/2", 7), "acme/github:o/r#1/comment/2/7/changed"},
		{"deleted", DeletedID("acme", "INC-1", 4), "acme/INC-1/4/deleted"},
		{"acl", ACLID("acme", "INC-1", 3, 2), "acme/INC-1/3/acl-2"},
		{"extracted", ExtractedID("acme", "INC-1", 3, 0), "acme/INC-1/3/extracted"},
		{"re-extracted for resolution", ExtractedID("acme", "INC-1", 3, 2), "acme/INC-1/3/extracted-r2"},
		{"graph", GraphID("acme", "INC-1", 3, 0), "acme/INC-1/3/graph"},
		{"graph of a re-resolution", GraphID("acme", "INC-1", 3, 1), "acme/INC-1/3/graph-r1"},
		{"communities", CommunitiesID("acme", 12), "acme//12/communities"},
		{"reports", ReportsID("acme", 12), "acme//12/reports"},
		{"re-resolution request", ReresolveID("acme", "7f3a9c01"), "acme//reresolve/7f3a9c01"},
		{"re-clustering request", ReclusterID("acme", "7f3a9c01"), "acme//recluster/7f3a9c01"},
		{"reconcile", ReconcileID("acme", []string{"r1", "r2"}, []string{"r9"}), "acme//reconcile/11f0aa2213478cdef8aac316"},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
		}
	}
	if ReconcileID("acme", []string{"r1"}, []string{"r2"}) == ReconcileID("acme", []string{"r1", "r2"}, nil) {
		t.Error("a reconciliation that removed r2 has the id of one that wrote it")
	}
}

// FuzzDecode: no input crashes a decoder, and whatever decodes also
// re-encodes and decodes to the same event.
func FuzzDecode(f *testing.F) {
	good, _ := Encode(validDoc())
	f.Add(good)
	f.Add([]byte(`{"schema":1,"tenant":"a","doc_id":"x","version":2,"received_at":"2024-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"schema":1,"tenant":"a","doc_id":"x","version":1,"text_units":[{"id":"u"}],"entities":[{"name":"n","type":"t","text_unit":"u"}],"relationships":[],"extractor":"x","received_at":"2024-01-01T00:00:00Z"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, mk := range []func() Validator{
			func() Validator { return &DocChanged{} }, func() Validator { return &DocDeleted{} },
			func() Validator { return &DocACL{} }, func() Validator { return &Extracted{} },
			func() Validator { return &GraphChanged{} }, func() Validator { return &CommunitiesChanged{} },
			func() Validator { return &ReportsChanged{} },
		} {
			v := mk()
			if err := Decode(data, v); err != nil {
				if !errors.Is(err, ErrInvalidEvent) {
					t.Fatalf("error does not wrap ErrInvalidEvent: %v", err)
				}
				continue
			}
			again, err := Encode(v)
			if err != nil {
				t.Fatalf("decoded event does not re-encode: %v", err)
			}
			if err := Decode(again, mk()); err != nil {
				t.Fatalf("re-encoded event does not decode: %v", err)
			}
		}
	})
}

func TestReclusterValidated(t *testing.T) {
	good := func() *Recluster {
		return &Recluster{Header: Header{Tenant: "acme"}, RequestID: "7f3a9c01", Full: true,
			RequestedAt: time.Unix(1700000000, 0).UTC()}
	}
	data, err := Encode(good())
	if err != nil {
		t.Fatal(err)
	}
	var got Recluster
	if err := Decode(data, &got); err != nil || !got.Full || got.Schema != SchemaVersion {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for name, spoil := range map[string]func(*Recluster){
		"no request id":   func(e *Recluster) { e.RequestID = "" },
		"space in id":     func(e *Recluster) { e.RequestID = "a b" },
		"no request time": func(e *Recluster) { e.RequestedAt = time.Time{} },
		"bad tenant":      func(e *Recluster) { e.Tenant = "Acme Corp" },
	} {
		ev := good()
		spoil(ev)
		if _, err := Encode(ev); !errors.Is(err, ErrInvalidEvent) {
			t.Errorf("%s: got %v, want ErrInvalidEvent", name, err)
		}
	}
}

func TestReresolveValidated(t *testing.T) {
	good := func() *Reresolve {
		return &Reresolve{Header: Header{Tenant: "acme"}, RequestID: "7f3a9c01", DocIDs: []string{"INC-1"},
			RequestedAt: time.Unix(1700000000, 0).UTC()}
	}
	data, err := Encode(good())
	if err != nil {
		t.Fatal(err)
	}
	var got Reresolve
	if err := Decode(data, &got); err != nil || got.DocIDs[0] != "INC-1" || got.Schema != SchemaVersion {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for name, spoil := range map[string]func(*Reresolve){
		"no request id":   func(e *Reresolve) { e.RequestID = "" },
		"slash in id":     func(e *Reresolve) { e.RequestID = "a/b" },
		"no documents":    func(e *Reresolve) { e.DocIDs = nil },
		"bad document":    func(e *Reresolve) { e.DocIDs = []string{""} },
		"no request time": func(e *Reresolve) { e.RequestedAt = time.Time{} },
		"bad tenant":      func(e *Reresolve) { e.Tenant = "Acme Corp" },
	} {
		ev := good()
		spoil(ev)
		if _, err := Encode(ev); !errors.Is(err, ErrInvalidEvent) {
			t.Errorf("%s: got %v, want ErrInvalidEvent", name, err)
		}
	}
}

func TestGraphChangedNamesAll(t *testing.T) {
	for _, c := range []struct {
		name string
		ev   GraphChanged
		want bool
	}{
		{"an applied change", GraphChanged{Touched: []string{"a"}, Contributed: []string{"a", "b"}}, true},
		{"a change of fragments only", GraphChanged{Contributed: []string{"b"}}, true},
		{"a redelivered change", GraphChanged{Contributed: []string{"a"}, Duplicate: true}, false},
		{"nothing contributed, or an older build's event", GraphChanged{Touched: []string{"a"}}, false},
		{"a document without entities", GraphChanged{}, false},
	} {
		if got := c.ev.NamesAll(); got != c.want {
			t.Errorf("%s: NamesAll() = %v, want %v", c.name, got, c.want)
		}
	}
}
