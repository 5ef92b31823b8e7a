package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kgstream/kgstream/pkg/provenance"
)

// strictDecode is Decode as it was before decodeCanonical: encoding/json
// alone. Decode must answer every input as it does.
func strictDecode(data []byte, v Validator) error {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: decoding %T: %w", ErrInvalidEvent, v, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: decoding %T: trailing data", ErrInvalidEvent, v)
	}
	if err := v.Validate(); err != nil {
		return fmt.Errorf("%w: %T: %w", ErrInvalidEvent, v, err)
	}
	return nil
}

// corpusText is a document of the shared corpora (non-ASCII, markup,
// quotes), or a stand-in with the same kinds of characters.
func corpusText() string {
	files, _ := filepath.Glob("../../../shared/corpora/*/*.md")
	if len(files) > 0 {
		if data, err := os.ReadFile(files[len(files)/2]); err == nil {
			return string(data)
		}
	}
	return "# Outage <b>&</b> \"quoted\" \\ back\tslash\u2028line é 東京 🚀 \x01 end"
}

// sampleEvents are events of every kind as their producers encode them.
func sampleEvents() []Validator {
	text := corpusText()
	at := time.Date(2026, 3, 4, 5, 6, 7, 891011121, time.UTC)
	units := []TextUnit{{ID: "u1", Text: text[:len(text)/2], Start: 0, End: len(text) / 2, Tokens: 300, Hash: "ab12"},
		{ID: "u2", Text: text[len(text)/2:], Start: len(text) / 2, End: len(text)}}
	ents := []RawEntity{{Name: "Kafka <broker>", Type: "component", Description: "the \"main\" broker", TextUnit: "u1"},
		{Name: "payments", Type: "service", Key: "payments-svc", Authority: AuthorityCatalogTitle}}
	rels := []RawRelationship{{Source: "payments", SourceType: "service", Relation: "depends_on", Target: "Kafka <broker>",
		TargetType: "component", Description: "calls", Strength: 0.1 + 0.2, TextUnit: "u2", SentenceStart: 3, SentenceEnd: 40, UnitHash: "ab12"}}
	h := Header{Tenant: "acme"}
	return []Validator{
		&DocChanged{Header: h, DocID: "INC-1", Version: 3, Source: "git", DocType: "incident", Title: "Outage é", Text: text,
			ACL: provenance.ACL{Groups: []string{"sre"}, Writers: provenance.Writers{Groups: []string{"eng"}}}, OccurredAt: at, ReceivedAt: at},
		&DocChanged{Header: h, DocID: "catalog-1", Version: 1, Text: " ", ACL: provenance.PublicACL(),
			Structured: &Structured{Entities: ents, Relationships: rels}, ReceivedAt: at.Truncate(time.Second)},
		&DocDeleted{Header: h, DocID: "INC-1", Version: 4, ReceivedAt: at},
		&DocACL{Header: h, DocID: "INC-1", Version: 3, ACLRevision: 2, ACL: provenance.ACL{Principals: []string{"ann"}}, ReceivedAt: at},
		&Extracted{Header: h, DocID: "INC-1", Version: 3, Title: "Outage", DocType: "incident", Extractor: "offline",
			TextUnits: units, Entities: ents, Relationships: rels, ReceivedAt: at, Resolution: 2},
		&Extracted{Header: h, DocID: "INC-2", Version: 1, Extractor: "offline", TextUnits: []TextUnit{}, ReceivedAt: at},
		&GraphChanged{Header: h, DocID: "INC-1", Version: 3, Touched: []string{"service:payments"}, Contributed: []string{"a", "b"},
			Entities: 10, Edges: 20, ReceivedAt: at},
		&Reresolve{Header: h, RequestID: "r1", DocIDs: []string{"INC-1"}, RequestedAt: at},
		&Recluster{Header: h, RequestID: "r2", Full: true, RequestedAt: at},
		&Recluster{Header: h, RequestID: "r3", RequestedAt: at},
	}
}

// fresh returns a new zero event of v's type.
func fresh(v Validator) Validator {
	return reflect.New(reflect.TypeOf(v).Elem()).Interface().(Validator)
}

// sameAsStrict decodes data into a new event of v's type with Decode and
// with strictDecode and fails unless both give the same value and error.
func sameAsStrict(t *testing.T, name string, v Validator, data []byte) {
	t.Helper()
	got, want := fresh(v), fresh(v)
	gotErr, wantErr := Decode(data, got), strictDecode(data, want)
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Errorf("%s: Decode error %v, encoding/json's %v", name, gotErr, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: Decode gives\n%+v\nencoding/json\n%+v", name, got, want)
	}
}

// TestDecodeIsEncodingJSONs: Decode decodes what producers publish on
// its fast path, and answers every input, canonical or not, valid or
// not, with the value and the error of encoding/json's strict decoding.
func TestDecodeIsEncodingJSONs(t *testing.T) {
	for _, ev := range sampleEvents() {
		data, err := Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("%T", ev)
		if !decodeCanonical(data, fresh(ev)) {
			t.Errorf("%s: an encoded event does not take the fast path", name)
		}
		sameAsStrict(t, name, ev, data)
		var indented bytes.Buffer
		if err := json.Indent(&indented, data, "", "  "); err != nil {
			t.Fatal(err)
		}
		sameAsStrict(t, name+" indented", ev, indented.Bytes())
	}
	ext, err := Encode(sampleEvents()[4])
	if err != nil {
		t.Fatal(err)
	}
	good := string(ext)
	edit := func(old, new string) []byte {
		if !strings.Contains(good, old) {
			t.Fatalf("%q is not in the event", old)
		}
		return []byte(strings.Replace(good, old, new, 1))
	}
	const at = `"received_at":"2026-03-04T05:06:07.891011121Z"`
	cases := map[string][]byte{
		"trailing brace":         []byte(good + "}"),
		"trailing bracket":       []byte(good + " ]"),
		"trailing newline":       []byte(good + "\n"),
		"trailing garbage":       []byte(good + " x"),
		"second value":           []byte(good + good),
		"truncated":              ext[:len(ext)/2],
		"empty":                  nil,
		"null":                   []byte("null"),
		"empty object":           []byte("{}"),
		"array":                  []byte("[]"),
		"key in capitals":        edit(`"doc_id"`, `"DOC_ID"`),
		"kelvin sign key":        edit(`"key"`, `"\u212aey"`),
		"escaped key":            edit(`"doc_id"`, `"doc\u005fid"`),
		"duplicate key":          edit(`"doc_id":"INC-1"`, `"doc_id":"INC-1","doc_id":"INC-9"`),
		"duplicate list":         edit(`"entities":[`, `"entities":[{"name":"x","type":"y"}],"entities":[`),
		"invalid UTF-8":          edit(`"title":"Outage"`, "\"title\":\"Out\xffage\xc3\""),
		"lone surrogate":         edit(`"title":"Outage"`, `"title":"Out\ud800age\udc00"`),
		"surrogate pair":         edit(`"title":"Outage"`, `"title":"Out\ud83d\ude80age"`),
		"needless escape":        edit(`"title":"Outage"`, `"title":"Out\u0061ge\/"`),
		"raw U+2028":             edit(`"title":"Outage"`, "\"title\":\"Out\u2028age\""),
		"raw HTML":               edit(`"title":"Outage"`, `"title":"<Outage & co>"`),
		"unknown field":          edit(`"schema":1`, `"schema":1,"bogus":true`),
		"unknown nested field":   edit(`"id":"u1"`, `"id":"u1","bogus":1`),
		"null list":              edit(`"entities":[`, `"entities":null,"x":[`),
		"null string":            edit(`"title":"Outage"`, `"title":null`),
		"null time":              edit(at, `"received_at":null`),
		"offset time":            edit(at, `"received_at":"2026-03-04T07:06:07.891011121+02:00"`),
		"lower-case time":        edit(at, `"received_at":"2026-03-04t05:06:07z"`),
		"time without zone":      edit(at, `"received_at":"2026-03-04T05:06:07"`),
		"February 30":            edit(at, `"received_at":"2026-02-30T05:06:07Z"`),
		"hour 24":                edit(at, `"received_at":"2026-03-04T24:00:00Z"`),
		"ten fractional digits":  edit(at, `"received_at":"2026-03-04T05:06:07.8910111213Z"`),
		"comma fraction":         edit(at, `"received_at":"2026-03-04T05:06:07,891Z"`),
		"offset hour 24":         edit(at, `"received_at":"2026-03-04T05:06:07+24:00"`),
		"escaped time":           edit(at, `"received_at":"2026-03-04T05:06:07\u005a"`),
		"float version":          edit(`"version":3`, `"version":3.0`),
		"exponent version":       edit(`"version":3`, `"version":3e0`),
		"negative zero version":  edit(`"version":3`, `"version":-0`),
		"leading zero version":   edit(`"version":3`, `"version":03`),
		"huge version":           edit(`"version":3`, `"version":99999999999999999999`),
		"string version":         edit(`"version":3`, `"version":"3"`),
		"huge strength":          edit(`"strength":0.3`, `"strength":1e400`),
		"exponent strength":      edit(`"strength":0.3`, `"strength":3E-1`),
		"integer as float field": edit(`"sentence_start":3`, `"sentence_start":3.5`),
		"schema 2":               edit(`"schema":1`, `"schema":2`),
		"bad tenant":             edit(`"tenant":"acme"`, `"tenant":"Acme Corp"`),
		"object for list":        edit(`"entities":[`, `"entities":{},"x":[`),
		"control character":      edit(`"title":"Outage"`, "\"title\":\"Out\x01age\""),
	}
	for name, data := range cases {
		sameAsStrict(t, name, &Extracted{}, data)
	}
	// An event of another kind than its bytes.
	sameAsStrict(t, "extraction as a deletion", &DocDeleted{}, ext)

	// A v that is not zero: decoded into as encoding/json decodes into it
	// (the fields the event leaves out keep their values).
	short, err := Encode(sampleEvents()[5])
	if err != nil {
		t.Fatal(err)
	}
	got := &Extracted{Title: "kept", TextUnits: []TextUnit{{ID: "old"}}, Entities: []RawEntity{{Name: "old", Type: "t"}}}
	want := &Extracted{Title: "kept", TextUnits: []TextUnit{{ID: "old"}}, Entities: []RawEntity{{Name: "old", Type: "t"}}}
	gotErr, wantErr := Decode(short, got), strictDecode(short, want)
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
		t.Errorf("decoding into a used event: %v %+v, encoding/json %v %+v", gotErr, got, wantErr, want)
	}
}

// FuzzDecodeIsEncodingJSONs compares Decode with encoding/json's strict
// decoding on arbitrary bytes (go test -fuzz FuzzDecodeIsEncodingJSONs).
func FuzzDecodeIsEncodingJSONs(f *testing.F) {
	for _, ev := range sampleEvents() {
		data, err := Encode(ev)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, v := range []Validator{&Extracted{}, &DocChanged{}, &GraphChanged{}} {
			sameAsStrict(t, fmt.Sprintf("%T", v), v, data)
		}
	})
}
