package extractor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/services/extractor"
)

func TestDocTypesResolveAndInfer(t *testing.T) {
	d := extractor.DefaultDocTypes()
	pm := "Summary: checkout was down. Impact: customers could not pay. Root cause: an expired certificate. " +
		"Timeline: 10:02 UTC alerted. Resolution: the certificate was renewed."
	for _, tc := range []struct {
		docType, text string
		want          extractor.DocTypeDecision
	}{
		{"incident", "anything", extractor.DocTypeDecision{Type: "incident"}},
		{"Incident", "anything", extractor.DocTypeDecision{Type: "incident"}},
		{"postmortem", "anything", extractor.DocTypeDecision{Type: "incident"}},
		{"post-mortem", "anything", extractor.DocTypeDecision{Type: "incident"}},
		{"runbook", "anything", extractor.DocTypeDecision{Type: "runbook"}},
		{"", pm, extractor.DocTypeDecision{Type: "incident", Inferred: true}},
		{"", "How to rotate the signing keys: run the script, then check the dashboard.", extractor.DocTypeDecision{Type: "document", Inferred: true}},
	} {
		got, err := d.Resolve(tc.docType, "", tc.text)
		require.NoError(t, err, tc.docType)
		require.Equal(t, tc.want, got, "%q %q", tc.docType, tc.text)
	}
	_, err := d.Resolve("banana", "", pm)
	require.ErrorIs(t, err, extractor.ErrUnknownDocType)

	// Offline, a missing doc_type is inferred and the incident gets its
	// failure mode; a free-form one makes no new entity type.
	x, err := extractor.NewOffline(extractor.OfflineConfig{DisableBundled: true})
	require.NoError(t, err)
	for _, docType := range []string{"", "banana"} {
		doc := &events.DocChanged{Header: events.Header{Tenant: "acme"}, DocID: "PM-1", Version: 1, DocType: docType, Text: pm}
		ents, rels, err := x.Extract(t.Context(), doc, []events.TextUnit{{ID: "u1", Text: pm, End: len(pm)}})
		require.NoError(t, err)
		require.Equal(t, "incident", ents[0].Type, docType)
		require.Contains(t, triplesOf(rels), "incident:PM-1 -failure-> failure_mode:expired certificate")
	}
}

func triplesOf(rels []events.RawRelationship) []string {
	var out []string
	for _, r := range rels {
		out = append(out, r.SourceType+":"+r.Source+" -"+r.Relation+"-> "+r.TargetType+":"+r.Target)
	}
	return out
}
