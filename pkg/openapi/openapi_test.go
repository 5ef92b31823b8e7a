package openapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// document is the part of an OpenAPI document the checks read.
type document struct {
	OpenAPI    string                          `json:"openapi"`
	Info       map[string]any                  `json:"info"`
	Paths      map[string]map[string]operation `json:"paths"`
	Components struct {
		Schemas   map[string]any `json:"schemas"`
		Responses map[string]struct {
			Content map[string]struct {
				Schema map[string]any `json:"schema"`
			} `json:"content"`
		} `json:"responses"`
		SecuritySchemes map[string]any `json:"securitySchemes"`
	} `json:"components"`
}

type operation struct {
	OperationID string `json:"operationId"`
	Summary     string `json:"summary"`
	Parameters  []struct {
		Name     string `json:"name"`
		In       string `json:"in"`
		Required bool   `json:"required"`
	} `json:"parameters"`
	Responses map[string]map[string]any `json:"responses"`
}

func load(t *testing.T) document {
	t.Helper()
	var d document
	if err := json.Unmarshal(Spec(), &d); err != nil {
		t.Fatalf("the spec is not JSON: %v", err)
	}
	return d
}

var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func TestSpecIsWellFormed(t *testing.T) {
	d := load(t)
	if d.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", d.OpenAPI)
	}
	if d.Info["title"] == nil || d.Info["version"] == nil {
		t.Error("info needs title and version")
	}
	if len(d.Paths) == 0 {
		t.Fatal("no paths")
	}
	ids := map[string]string{}
	param := regexp.MustCompile(`\{([^}]+)\}`)
	for path, ops := range d.Paths {
		if !strings.HasPrefix(path, "/") {
			t.Errorf("path %q does not start with /", path)
		}
		var inPath []string
		for _, m := range param.FindAllStringSubmatch(path, -1) {
			inPath = append(inPath, m[1])
		}
		for method, op := range ops {
			where := strings.ToUpper(method) + " " + path
			if !slices.Contains(methods, method) {
				t.Errorf("%s: %q is not an HTTP method", where, method)
				continue
			}
			if op.OperationID == "" || op.Summary == "" {
				t.Errorf("%s: operationId and summary are needed", where)
			}
			if prev, dup := ids[op.OperationID]; dup {
				t.Errorf("%s: operationId %s also names %s", where, op.OperationID, prev)
			}
			ids[op.OperationID] = where
			var declared []string
			for _, p := range op.Parameters {
				if p.In == "path" {
					if !p.Required {
						t.Errorf("%s: path parameter %s must be required", where, p.Name)
					}
					declared = append(declared, p.Name)
				}
			}
			slices.Sort(declared)
			want := slices.Clone(inPath)
			slices.Sort(want)
			if !slices.Equal(declared, want) {
				t.Errorf("%s: path parameters %v declared, the path has %v", where, declared, want)
			}
			if len(op.Responses) == 0 {
				t.Errorf("%s: no responses", where)
			}
			for code, r := range op.Responses {
				// /readyz answers 503 with its probe body, not an error.
				if code >= "400" && path != "/readyz" {
					ref, _ := r["$ref"].(string)
					if !strings.HasPrefix(ref, "#/components/responses/") {
						t.Errorf("%s %s: an error answer must be one of the shared error responses, got %v", where, code, r)
					}
				}
			}
		}
	}
	// Every shared error response is the JSON error shape.
	for name, r := range d.Components.Responses {
		if ref := r.Content["application/json"].Schema["$ref"]; ref != "#/components/schemas/Error" {
			t.Errorf("response %s: schema %v, want the Error schema", name, ref)
		}
	}
	errSchema, _ := json.Marshal(d.Components.Schemas["Error"])
	for _, f := range []string{`"error"`, `"code"`, `"message"`} {
		if !strings.Contains(string(errSchema), f) {
			t.Errorf("the Error schema lacks %s: %s", f, errSchema)
		}
	}
}

// TestEveryRefResolves walks the whole document: every $ref must point at
// something that exists.
func TestEveryRefResolves(t *testing.T) {
	var root any
	if err := json.Unmarshal(Spec(), &root); err != nil {
		t.Fatal(err)
	}
	var refs int
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if k == "$ref" {
					refs++
					s, _ := x.(string)
					if !resolves(root, s) {
						t.Errorf("$ref %q resolves to nothing", s)
					}
					continue
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(root)
	if refs == 0 {
		t.Fatal("no $ref found: the walk is broken")
	}
	if resolves(root, "#/components/schemas/Nope") {
		t.Fatal("a missing $ref resolved")
	}
}

func resolves(root any, ref string) bool {
	p, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return false
	}
	cur := root
	for _, seg := range strings.Split(p, "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")]; !ok {
			return false
		}
	}
	return true
}

func TestHandlerServesTheSpec(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + Path)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if string(body) != string(Spec()) {
		t.Fatal("the served document differs from the embedded one")
	}
	etag := resp.Header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+Path, nil)
	req.Header.Set("If-None-Match", etag)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match with the ETag: status %d, want 304", resp.StatusCode)
	}
	// Spec hands out a copy: changing it changes nothing served.
	s := Spec()
	s[0] = 'x'
	if Spec()[0] == 'x' {
		t.Fatal("Spec returned the embedded bytes themselves")
	}
}
