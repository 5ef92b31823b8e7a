package app_test

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
	"github.com/kgstream/kgstream/pkg/openapi"
)

// TestOpenAPICoversEveryRoute holds the OpenAPI document and the code to
// each other, both ways:
//   - every route pattern the code registers on a mux (found by reading the
//     Handle/HandleFunc calls of every non-test Go file of the repository)
//     is a path and method of the spec;
//   - every path and method of the spec is routed by the all-in-one (a
//     request to it gets no routing 404/405), and every other method on a
//     spec path is not;
//   - the all-in-one serves the document at /openapi.json.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	var spec struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(openapi.Spec(), &spec))
	inSpec := func(method, path string) bool {
		ops, ok := spec.Paths[path]
		if !ok {
			return false
		}
		if method == "" {
			return len(ops) > 0
		}
		_, ok = ops[strings.ToLower(method)]
		return ok
	}

	patterns := registeredPatterns(t, filepath.Join("..", "..", ".."))
	require.GreaterOrEqual(t, len(patterns), 15, "too few route patterns found in the code: %v", patterns)
	t.Logf("%d route patterns registered in the code", len(patterns))
	for _, p := range patterns {
		method, path, _ := strings.Cut(p.pattern, " ")
		if path == "" {
			method, path = "", method
		}
		if strings.HasSuffix(path, "/") {
			continue // a subtree handed to another mux, whose own patterns are listed
		}
		require.True(t, inSpec(method, path), "%s registers %q, which the OpenAPI document lacks", p.where, p.pattern)
	}

	a := startApp(t, app.Config{})
	resp, err := http.Get(a.URL() + openapi.Path)
	require.NoError(t, err)
	served, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, openapi.Spec(), served)

	params := regexp.MustCompile(`\{[^}]+\}`)
	all := []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch}
	for path, ops := range spec.Paths {
		concrete := params.ReplaceAllStringFunc(path, func(p string) string {
			if p == "{type}" {
				return "service"
			}
			return "openapi-probe"
		})
		for _, m := range all {
			base := a.URL()
			if path == "/metrics" {
				base = a.OpsURL() // the all-in-one serves metrics on its ops listener only
			}
			routed := probe(t, base, m, concrete)
			_, want := ops[strings.ToLower(m)]
			if want {
				require.True(t, routed, "the spec has %s %s; the all-in-one does not route it", m, path)
			} else {
				require.False(t, routed, "the all-in-one routes %s %s, which the spec lacks", m, path)
			}
		}
	}
}

// probe sends an empty request and says whether a route took it: the
// routing answers are 405, and 404 with the mux's "no route" message
// (a handler's own 404, such as an unknown document, names what is unknown).
func probe(t *testing.T, base, method, path string) bool {
	t.Helper()
	req, err := http.NewRequest(method, base+path, bytes.NewReader([]byte("{}")))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	switch {
	case resp.StatusCode == http.StatusMethodNotAllowed:
		return false
	case resp.StatusCode == http.StatusNotFound && body.Error.Code == "not_found" && strings.HasPrefix(body.Error.Message, "no route"):
		return false
	}
	return true
}

// routePattern is a pattern a mux registers, and where.
type routePattern struct{ pattern, where string }

// registeredPatterns reads every non-test Go file under root (test servers
// in *test packages aside) and returns the first argument of each
// Handle/HandleFunc call, and of the query service's handle helper, that is
// a string literal or a string constant of the package.
func registeredPatterns(t *testing.T, root string) []routePattern {
	t.Helper()
	dirs := map[string][]string{}
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || strings.HasSuffix(name, "test")) {
				return filepath.SkipDir
			}
			return nil
		}
		// kgstream mcp serves the MCP protocol on a listener of its own, not
		// the kgstream HTTP API.
		if filepath.Base(p) == "mcp.go" && filepath.Base(filepath.Dir(p)) == "kgstream" {
			return nil
		}
		if strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			dirs[filepath.Dir(p)] = append(dirs[filepath.Dir(p)], p)
		}
		return nil
	}))
	var out []routePattern
	fset := token.NewFileSet()
	for _, files := range dirs {
		var parsed []*ast.File
		consts := map[string]string{}
		for _, f := range files {
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			af, err := parser.ParseFile(fset, f, src, 0)
			require.NoError(t, err)
			parsed = append(parsed, af)
			for _, decl := range af.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							if s, ok := stringValue(vs.Values[i], nil); ok {
								consts[n.Name] = s
							}
						}
					}
				}
			}
		}
		for _, af := range parsed {
			ast.Inspect(af, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || len(call.Args) < 2 {
					return true
				}
				var arg ast.Expr
				switch sel.Sel.Name {
				case "Handle", "HandleFunc":
					arg = call.Args[0]
				case "handle":
					arg = call.Args[1]
				default:
					return true
				}
				if s, ok := stringValue(arg, consts); ok && (strings.HasPrefix(s, "/") || strings.Contains(s, " /")) {
					out = append(out, routePattern{pattern: s, where: fset.Position(call.Pos()).String()})
				}
				return true
			})
		}
	}
	return out
}

// stringValue evaluates a string literal, a known constant, or a + of them.
func stringValue(e ast.Expr, consts map[string]string) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.Ident:
		s, ok := consts[e.Name]
		return s, ok
	case *ast.SelectorExpr:
		// openapi.Path and the like: a constant of another package.
		if x, ok := e.X.(*ast.Ident); ok && x.Name == "openapi" && e.Sel.Name == "Path" {
			return openapi.Path, true
		}
		return "", false
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		l, ok1 := stringValue(e.X, consts)
		r, ok2 := stringValue(e.Y, consts)
		return l + r, ok1 && ok2
	}
	return "", false
}
