package embedded

import (
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
)

// TestReportIndexBuiltForOlderFiles removes the report index behind the
// adapter's back, as in a file written before it existed: opening the file
// again builds it from the stored reports.
func TestReportIndexBuiltForOlderFiles(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	r := store.Report{ID: "r1", Community: "c1", Sources: []provenance.SourceRef{{DocID: "d", Version: 3}}}
	if err := s.PutReport(ctx, "acme", r); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte(bucketReportIndex)) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rs, err := s.ReportsBySource(ctx, "acme", "d")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].ID != "r1" {
		t.Fatalf("reports citing d after reopening: %+v", rs)
	}
	cites, err := s.ReportCitations(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if got := cites["r1"]; len(got) != 1 || got[0] != (provenance.SourceRef{DocID: "d", Version: 3}) {
		t.Fatalf("citations of r1: %+v", cites)
	}
}

// TestGraphIndexesBuiltForOlderFiles: a file without the relation and name
// indexes gets them built when it is opened.
func TestGraphIndexesBuiltForOlderFiles(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	c := store.Contributions{
		Entities: []store.EntityContribution{{ID: "incident:a", Type: "incident", Name: "INC A"}, {ID: "failure_mode:b", Type: "failure_mode", Name: "b"}},
		Edges:    []store.EdgeContribution{{Source: "incident:a", Relation: "failure", Target: "failure_mode:b"}},
	}
	if _, err := s.Apply(ctx, "acme", "d", 1, c); err != nil {
		t.Fatal(err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		t, err := tenantBucket(tx, bucketGraph, "acme", false)
		if err != nil {
			return err
		}
		if err := t.DeleteBucket([]byte(subByRel)); err != nil {
			return err
		}
		return t.DeleteBucket([]byte(subByName))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	es, err := s.EdgesByRelation(ctx, "acme", "failure", "incident")
	if err != nil || len(es) != 1 {
		t.Fatalf("failure edges after reopening: %v %+v", err, es)
	}
	ents, err := s.EntitiesByName(ctx, "acme", "inc a")
	if err != nil || len(ents) != 1 || ents[0].ID != "incident:a" {
		t.Fatalf("entities named inc a after reopening: %v %+v", err, ents)
	}
}
