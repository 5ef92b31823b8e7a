package gateway_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
)

// modelDoc is what the model knows of one document.
type modelDoc struct {
	version, aclRev int64
	deleted         bool
	acl             provenance.ACL
	text            string
}

type modelCaller struct {
	token, principal string
	groups           []string
	power            bool // a writer or admin token
}

// modelACLs are the ACLs requests send, as JSON; "" sends none.
var modelACLs = []string{``, `{"public":true}`, `{"groups":["sre"]}`, `{"groups":["payments"]}`,
	`{"principals":["xavier"]}`, `{"public":true,"writers":{"groups":["sre"]}}`, `{}`, `null`}

func parseModelACL(s string) (provenance.ACL, bool) {
	if s == "" {
		return provenance.PublicACL(), true
	}
	var a *provenance.ACL
	if err := json.Unmarshal([]byte(s), &a); err != nil || a == nil {
		return provenance.ACL{}, false
	}
	n := a.Normalize()
	return n, n.Public || len(n.Groups) > 0 || len(n.Principals) > 0
}

func modelReads(c modelCaller, d *modelDoc) bool {
	if d.acl.Public || slices.Contains(d.acl.Principals, c.principal) {
		return true
	}
	for _, g := range c.groups {
		if slices.Contains(d.acl.Groups, g) {
			return true
		}
	}
	return false
}

func modelWrites(c modelCaller, d *modelDoc) bool {
	if c.power || slices.Contains(d.acl.Writers.Principals, c.principal) {
		return true
	}
	for _, g := range c.groups {
		if slices.Contains(d.acl.Writers.Groups, g) {
			return true
		}
	}
	return false
}

// modelGate is the write check: 0 when allowed, else the refusal status.
func modelGate(c modelCaller, d *modelDoc) int {
	switch {
	case d == nil || d.deleted || modelWrites(c, d):
		return 0
	case modelReads(c, d):
		return 403
	}
	return 404
}

func withModelWriters(acl provenance.ACL, d *modelDoc, c modelCaller) provenance.ACL {
	if len(acl.Writers.Groups)+len(acl.Writers.Principals) > 0 {
		return acl
	}
	if d != nil && !d.deleted {
		acl.Writers = d.acl.Writers
	} else if !c.power {
		acl.Writers = provenance.Writers{Principals: []string{c.principal}}
	}
	return acl
}

func TestRandomWritesMatchTheModel(t *testing.T) {
	seed := rand.Uint64()
	if s, err := strconv.ParseUint(os.Getenv("KG_MODEL_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	f := setupPeople(t)
	callers := []modelCaller{{token: "w", principal: "writer", power: true}, {token: "root", principal: "root", power: true},
		{token: "u", principal: "user", groups: []string{"sre"}}, {token: "x", principal: "xavier"}}
	goodIDs := []string{"a", "team/b.md", "ü d", "%2F", "."}
	badIDs := []string{" a", "a\u200b", "a\u202e", "", strings.Repeat("x", provenance.MaxDocIDBytes+1)}
	versions := []int64{0, 0, 0, 1, 2, 3, 5, -1, provenance.MaxContentVersion, provenance.MaxContentVersion + 1, math.MaxInt64}
	texts := []string{"one", "two", "three"}
	model := map[string]*modelDoc{}
	type lastPost struct {
		c             modelCaller
		id, text, acl string
	}
	var last lastPost
	const ops = 400
	counts := map[int]int{}
	for i := range ops {
		c := callers[rng.IntN(len(callers))]
		id := goodIDs[rng.IntN(len(goodIDs))]
		bad := rng.IntN(8) == 0
		if bad {
			id = badIDs[rng.IntN(len(badIDs))]
		}
		d := model[id]
		var method, path, body string
		want, apply := 0, func() {}
		switch op := rng.IntN(10); {
		case op < 6: // POST
			v := versions[rng.IntN(len(versions))]
			text := texts[rng.IntN(len(texts))]
			aclJSON := modelACLs[rng.IntN(len(modelACLs))]
			if last.id != "" && rng.IntN(4) == 0 {
				// The same document again, as a sync sends it.
				c, id, v, text, aclJSON, bad = last.c, last.id, 0, last.text, last.acl, false
				d = model[id]
			}
			m := map[string]any{"id": id, "text": text}
			if v != 0 {
				m["version"] = v
			}
			if aclJSON != "" {
				m["acl"] = json.RawMessage(aclJSON)
			}
			data, err := json.Marshal(m)
			require.NoError(t, err)
			method, path, body = "POST", "/v1/documents", string(data)
			if rng.IntN(12) == 0 {
				body = `{"id":"a","text":"` + strings.Repeat("x", 1<<16) + `"}`
				want = 413
				break
			}
			acl, okACL := parseModelACL(aclJSON)
			if aclJSON == "null" { // in a document, no ACL: public
				acl, okACL = provenance.PublicACL(), true
			}
			switch {
			case bad, v < 0, v > provenance.MaxContentVersion:
				want = 400
			case !okACL:
				want = 400
			case modelGate(c, d) != 0:
				want = modelGate(c, d)
			}
			if want != 0 {
				break
			}
			acl = withModelWriters(acl, d, c)
			next := modelDoc{acl: acl, text: text}
			switch {
			case d == nil:
				next.version = max(v, 1)
			case !d.deleted && d.text == text && d.acl.Equal(acl) && (v == 0 || v == d.version):
				want = 200 // unchanged
			case v == 0 && d.version >= provenance.MaxContentVersion:
				want = 400
			case v != 0 && (v < d.version || (d.deleted && v == d.version)):
				want = 409
			case v == 0:
				next.version = d.version + 1
			default:
				next.version = v
			}
			if want != 0 {
				break
			}
			if d != nil {
				next.aclRev = d.aclRev
				if !d.acl.Equal(acl) {
					next.aclRev++
				}
			}
			want, apply = 202, func() { model[id] = &next; last = lastPost{c, id, text, aclJSON} }
		case op < 8: // PUT acl
			aclJSON := modelACLs[1+rng.IntN(len(modelACLs)-1)]
			method, path, body = "PUT", "/v1/documents/"+url.PathEscape(id)+"/acl", aclJSON
			if id == "." {
				path = "/v1/documents/%2E/acl"
			}
			acl, okACL := parseModelACL(aclJSON)
			switch {
			case bad || !okACL:
				want = 400
			case modelGate(c, d) != 0:
				want = modelGate(c, d)
			case d == nil || d.deleted:
				want = 404
			default:
				next := *d
				next.acl = withModelWriters(acl, d, c)
				next.aclRev++
				want, apply = 202, func() { model[id] = &next }
			}
		default: // DELETE
			method, path = "DELETE", "/v1/documents/"+url.PathEscape(id)
			if id == "." {
				path = "/v1/documents/%2E"
			}
			switch {
			case bad:
				want = 400
			case modelGate(c, d) != 0:
				want = modelGate(c, d)
			case d == nil:
				want = 404
			case d.deleted:
				want = 202
			default:
				next := *d
				next.version++
				next.deleted = true
				want, apply = 202, func() { model[id] = &next }
			}
		}
		if id == "" && method != "POST" {
			continue // not a path to one document
		}
		status, out := f.do(t, method, path, c.token, body)
		require.Equal(t, want, status, "op %d (seed %d): %s %s by %s: %s -> %v", i, seed, method, path, c.token, body, out)
		counts[status]++
		apply()
		requireModel(t, f, model, fmt.Sprintf("op %d (seed %d): %s %s by %s", i, seed, method, path, c.token))
	}
	t.Logf("answers by status: %v", counts)
	for _, s := range []int{200, 202, 400, 403, 404, 409, 413} {
		require.Positive(t, counts[s], "no %d in %d operations: the mix does not exercise it", s, ops)
	}
}

func requireModel(t *testing.T, f *fixture, model map[string]*modelDoc, what string) {
	t.Helper()
	got := map[string]modelDoc{}
	for _, st := range f.registry(t) {
		got[st.DocID] = modelDoc{version: st.Version, aclRev: st.ACLRevision, deleted: st.Deleted, acl: st.ACL.Normalize()}
	}
	want := map[string]modelDoc{}
	for id, d := range model {
		want[id] = modelDoc{version: d.version, aclRev: d.aclRev, deleted: d.deleted, acl: d.acl.Normalize()}
	}
	require.Equal(t, want, got, what)
}
