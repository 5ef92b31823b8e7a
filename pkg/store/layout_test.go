package store

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestDecodeHeadsAsFreshValues decodes heads of every shape one after the
// other, as an apply does with its scratch values, and checks each gives
// what decoding into a fresh value gives (nil and empty slices told
// apart), that a field one head has does not leak into the next, and that
// the heads decoded earlier are left as they were.
func TestDecodeHeadsAsFreshValues(t *testing.T) {
	fresh := func(data []byte, v any) {
		t.Helper()
		if err := DecodeValue(data, v); err != nil {
			t.Fatal(err)
		}
	}
	support := func(doc string, units ...string) Fragment {
		return Fragment{DocID: doc, Version: 2, TextUnits: units, Description: "d " + doc, Weight: 1.5, Name: "n", NameRank: 1}
	}
	long := strings.Repeat("a long description, compressed ", 20)
	edges := []struct {
		id   string
		data string // a stored value, or "" to encode head
		head EdgeHead
	}{
		{id: "a|r|b", head: EdgeHead{ID: "a|r|b", Source: "a", Relation: "r", Target: "b", Supports: 3,
			Inline: []Fragment{support("d1", "u1", "u2"), support("d2"), support("d3", "u3")}}},
		{id: "a|r|c", head: EdgeHead{ID: "a|r|c", Source: "a", Relation: "r", Target: "c", Supports: 7, Spilled: true}},
		{id: "x|y|z|w", head: EdgeHead{ID: "x|y|z|w", Source: "x|y", Relation: "z", Target: "w", Supports: 1,
			Inline: []Fragment{{DocID: "d", Version: 1, Description: long}}}},
		{id: "a|r|d", head: EdgeHead{ID: "a|r|d", Source: "a", Relation: "r", Target: "d", Supports: MaxInlineSupports,
			Inline: []Fragment{support("d1", "u"), support("d2", "u"), support("d3", "u"), support("d4", "u")}}},
		{id: "a|r|e", data: `{"n":1,"i":[]}`},
		{id: "a|r|f", data: `{"n":1,"i":null}`},
		{id: "p|q|r", data: `{"s":"p","r":"q","t":"r","n":12,"i":[` + strings.Repeat(`{"k":"d","v":1,"u":["u"]},`, 11) + `{"k":"e","v":1}]}`},
		{id: "a|r|g", data: `{"n":1}`},
	}
	var got []EdgeHead
	var want []EdgeHead
	for _, e := range edges {
		data := []byte(e.data)
		if e.data == "" {
			var err error
			if data, err = EncodeEdgeHead(e.head); err != nil {
				t.Fatal(err)
			}
		}
		h, err := DecodeEdgeHead(e.id, data)
		if err != nil {
			t.Fatal(err)
		}
		// The decoding before scratch values: into a fresh value.
		var st storedEdgeHead
		fresh(data, &st)
		w := EdgeHead{ID: e.id, Source: st.Source, Relation: st.Relation, Target: st.Target, Supports: st.Supports, Spilled: st.Spilled}
		for _, f := range st.Inline {
			w.Inline = append(w.Inline, f.fragment(f.DocID))
		}
		if w.Source == "" && w.Relation == "" && w.Target == "" {
			w.Source, w.Relation, w.Target, _ = splitEdgeID(e.id)
		}
		if !reflect.DeepEqual(h, w) {
			t.Fatalf("edge head %s: got %+v, want %+v", e.id, h, w)
		}
		if e.data == "" && !reflect.DeepEqual(h, e.head) {
			t.Fatalf("edge head %s: got %+v, encoded %+v", e.id, h, e.head)
		}
		got, want = append(got, h), append(want, w)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("heads decoded earlier changed: got %+v, want %+v", got, want)
	}

	entities := []string{
		`{"t":"service","n":"Kafka","v":[{"r":1,"n":"Kafka","c":3,"f":"d1"},{"n":"kafka","c":1}]}`,
		`{"t":"team","n":"Ops","v":[{"n":"Ops","c":1}]}`,
		`{"t":"tool","n":"Empty","v":[]}`,
		`{"t":"tool","n":"Null","v":null}`,
		`{"t":"tool"}`,
		`{"t":"many","n":"m","v":[` + strings.Repeat(`{"n":"m","c":1,"f":"x"},`, 11) + `{"n":"z","c":2}]}`,
		`{"n":"No type","v":[{"n":"No type","c":1}]}`,
	}
	var gotE, wantE []EntityHead
	for i, data := range entities {
		id := fmt.Sprintf("e%d", i)
		h, err := DecodeEntityHead(id, []byte(data))
		if err != nil {
			t.Fatal(err)
		}
		var w EntityHead
		fresh([]byte(data), &w)
		w.ID = id
		if !reflect.DeepEqual(h, w) {
			t.Fatalf("entity head %s: got %#v, want %#v", data, h, w)
		}
		gotE, wantE = append(gotE, h), append(wantE, w)
	}
	if !reflect.DeepEqual(gotE, wantE) {
		t.Fatalf("entity heads decoded earlier changed: got %+v, want %+v", gotE, wantE)
	}
}
