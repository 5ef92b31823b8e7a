//go:build integration

package leiden

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fixtureDir resolves the shared fixtures relative to the package directory
// (go test runs with the package as working directory).
func fixtureDir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "shared", "fixtures", "leiden"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
		t.Fatalf("leiden fixtures missing at %s: %v", dir, err)
	}
	return dir
}

func loadNetwork(t testing.TB, name string) *Network {
	t.Helper()
	net, _ := loadNetworkEdges(t, name)
	return net
}

func loadNetworkEdges(t testing.TB, name string) (*Network, []Edge) {
	t.Helper()
	f, err := os.Open(filepath.Join(fixtureDir(t), name+".edges.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	edges, err := ReadEdges(f)
	if err != nil {
		t.Fatal(err)
	}
	net, err := NewNetwork(edges)
	if err != nil {
		t.Fatal(err)
	}
	return net, edges
}

func readFixture(t testing.TB, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir(t), file))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// compareRows fails with the first differing row so a mismatch is easy to
// locate in the fixture.
func compareRows(t *testing.T, file, got string) {
	t.Helper()
	want := readFixture(t, file)
	if got == want {
		return
	}
	g := strings.Split(strings.TrimRight(got, "\n"), "\n")
	w := strings.Split(strings.TrimRight(want, "\n"), "\n")
	diffs := 0
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			if diffs < 5 {
				t.Errorf("%s row %d: got %q, want %q", file, i+1, gl, wl)
			}
			diffs++
		}
	}
	t.Fatalf("%s: %d of %d rows differ (got %d rows)", file, diffs, len(w), len(g))
}

func TestFixtureFlat(t *testing.T) {
	cases := []struct {
		name     string
		q        float64
		clusters int
	}{
		{"karate", 0.41880341880341887, 4},
		{"sbm5k", 0.40682501027638174, 22},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			net, edges := loadNetworkEdges(t, tc.name)
			cl, q, err := Leiden(net, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := WriteFlat(&buf, net, cl); err != nil {
				t.Fatal(err)
			}
			compareRows(t, tc.name+".flat.tsv", buf.String())
			if q != tc.q {
				t.Errorf("quality = %.17g, want %.17g", q, tc.q)
			}
			if m := modularityOf(t, edges, net, cl, 1); !approxEqual(m, tc.q, 1e-12) {
				t.Errorf("independent modularity = %.17g, want %.17g", m, tc.q)
			}
			if k := countClusters(cl); k != tc.clusters {
				t.Errorf("%d clusters, want %d", k, tc.clusters)
			}
		})
	}
}

func TestFixtureHierarchical(t *testing.T) {
	cases := []struct {
		name string
		mcs  int
	}{
		{"karate", 10},
		{"seed-postmortems", 6},
		{"christmas-carol", 10},
		{"sbm5k", 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			net := loadNetwork(t, tc.name)
			rows, err := Hierarchical(net, DefaultOptions(), tc.mcs)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := WriteHierarchical(&buf, rows); err != nil {
				t.Fatal(err)
			}
			compareRows(t, tc.name+".hier"+strconv.Itoa(tc.mcs)+".tsv", buf.String())
			checkHierarchy(t, net, rows)
		})
	}
}

// TestChristmasCarolGolden pins the numbers GraphRAG's own test pins.
func TestChristmasCarolGolden(t *testing.T) {
	net := loadNetwork(t, "christmas-carol")
	if net.NumNodes() != 535 || net.NumEdges() != 916 {
		t.Fatalf("got %d nodes %d edges, want 535/916", net.NumNodes(), net.NumEdges())
	}
	rows, err := Hierarchical(net, DefaultOptions(), 10)
	if err != nil {
		t.Fatal(err)
	}
	perLevel := map[int]map[int]bool{}
	all := map[int]bool{}
	for _, r := range rows {
		if perLevel[r.Level] == nil {
			perLevel[r.Level] = map[int]bool{}
		}
		perLevel[r.Level][r.Cluster] = true
		all[r.Cluster] = true
	}
	want := map[int]int{0: 23, 1: 65, 2: 32, 3: 2}
	if len(perLevel) != len(want) {
		t.Errorf("levels = %d, want %d", len(perLevel), len(want))
	}
	for l, n := range want {
		if len(perLevel[l]) != n {
			t.Errorf("level %d: %d clusters, want %d", l, len(perLevel[l]), n)
		}
	}
	if len(all) != 122 {
		t.Errorf("%d clusters, want 122", len(all))
	}
}

func TestSeedPostmortemsLevel0(t *testing.T) {
	net := loadNetwork(t, "seed-postmortems")
	rows, err := Hierarchical(net, DefaultOptions(), 6)
	if err != nil {
		t.Fatal(err)
	}
	level0 := map[int]bool{}
	seen := 0
	for _, r := range rows {
		if r.Level == 0 {
			level0[r.Cluster] = true
			seen++
		}
	}
	if len(level0) != 6 || seen != net.NumNodes() {
		t.Fatalf("level 0: %d communities over %d nodes, want 6 over %d", len(level0), seen, net.NumNodes())
	}
	if _, ok := net.Index("INC-118"); !ok {
		t.Fatal("INC-118 missing from the network")
	}
}
