package offline_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/services/extractor/offline"
)

// Offline, a missing doc_type is inferred and the incident gets its
// failure mode; a free-form one makes no new entity type.
func TestOfflineTypesDocumentsWithoutDocType(t *testing.T) {
	pm := "Summary: checkout was down. Impact: customers could not pay. Root cause: an expired certificate. " +
		"Timeline: 10:02 UTC alerted. Resolution: the certificate was renewed."
	x, err := offline.New(offline.Config{DisableBundled: true})
	require.NoError(t, err)
	for _, docType := range []string{"", "banana"} {
		doc := &events.DocChanged{Header: events.Header{Tenant: "acme"}, DocID: "PM-1", Version: 1, DocType: docType, Text: pm}
		ents, rels, err := x.Extract(t.Context(), doc, []events.TextUnit{{ID: "u1", Text: pm, End: len(pm)}})
		require.NoError(t, err)
		require.Equal(t, "incident", ents[0].Type, docType)
		var failures []string
		for _, r := range rels {
			if r.Relation == "failure" {
				failures = append(failures, r.SourceType+":"+r.Source+" -> "+r.TargetType+":"+r.Target)
			}
		}
		require.Contains(t, failures, "incident:PM-1 -> failure_mode:expired certificate")
	}
}
