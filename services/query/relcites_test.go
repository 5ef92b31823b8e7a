package query_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/services/query"
)

// TestLocalRelationshipCitesAFewOfItsDocuments: a relationship stated by
// more readable documents than a context item cites lists the first eight
// and says how many the caller can read, in the item (supports) and in the
// answer's fact line; documents the caller may not read are neither cited
// nor counted.
func TestLocalRelationshipCitesAFewOfItsDocuments(t *testing.T) {
	st := &failingStores{Stores: openStore(t)}
	for i := range 14 {
		doc := fmt.Sprintf("PM-%03d", i)
		acl := incidentACL()
		if i%5 == 4 { // PM-004, PM-009: security only
			acl = provenance.ACL{Groups: []string{"secops"}}
		}
		text := fmt.Sprintf("In incident %d the Kafka cluster starved the ledger service of connections.", i)
		c := store.Contributions{Title: doc, DocType: "postmortem",
			TextUnits: []events.TextUnit{{ID: "u0", Text: text, End: len(text)}},
			Entities: []store.EntityContribution{
				{ID: "component:kafka", Type: "component", Name: "Kafka", NameRank: 2, TextUnits: []string{"u0"}},
				{ID: "service:ledger", Type: "service", Name: "ledger", NameRank: 2, TextUnits: []string{"u0"}},
			},
			Edges: []store.EdgeContribution{{Source: "component:kafka", Relation: "depends_on", Target: "service:ledger", TextUnits: []string{"u0"}}},
		}
		if i < 3 {
			c.Entities = append(c.Entities, store.EntityContribution{ID: "datastore:postgres", Type: "datastore", Name: "Postgres", NameRank: 2, TextUnits: []string{"u0"}})
			c.Edges = append(c.Edges, store.EdgeContribution{Source: "service:ledger", Relation: "depends_on", Target: "datastore:postgres", TextUnits: []string{"u0"}})
		}
		announceApply(t, st, tenantAcme, doc, 1, acl, c)
	}
	f := (&fixture{t: t, st: st}).withConfig(query.Config{})

	var resp query.QueryResponse
	require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/v1/query", tokAlice,
		map[string]any{"mode": "local", "question": "What does Kafka do to the ledger service?"}, &resp))
	var rel *query.ContextItem
	for i, it := range resp.Context {
		if it.Kind == query.KindRelationship && it.ID == store.EdgeID("component:kafka", "depends_on", "service:ledger") {
			rel = &resp.Context[i]
		}
	}
	require.NotNil(t, rel, "context: %+v", resp.Context)
	var docs []string
	for _, c := range rel.Citations {
		docs = append(docs, c.DocID)
	}
	require.Equal(t, []string{"PM-000", "PM-001", "PM-002", "PM-003", "PM-005", "PM-006", "PM-007", "PM-008"}, docs)
	require.Equal(t, 12, rel.Supports)
	require.Contains(t, resp.Answer, "(stated in 12 documents you can read)")
	raw := fmt.Sprintf("%+v", resp)
	for _, secret := range []string{"PM-004", "PM-009"} {
		require.False(t, strings.Contains(raw, secret), "%s leaked: %s", secret, raw)
	}

	// A relationship stated by three documents cites all three and gives
	// no count.
	small := 0
	for _, it := range resp.Context {
		if it.Kind == query.KindRelationship && it.ID == store.EdgeID("service:ledger", "depends_on", "datastore:postgres") {
			small++
			require.Len(t, it.Citations, 3)
			require.Zero(t, it.Supports)
		}
	}
	require.Equal(t, 1, small, "context: %+v", resp.Context)
}
