package doctype_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/doctype"
)

func TestDocTypesResolveAndInfer(t *testing.T) {
	d := doctype.Default()
	pm := "Summary: checkout was down. Impact: customers could not pay. Root cause: an expired certificate. " +
		"Timeline: 10:02 UTC alerted. Resolution: the certificate was renewed."
	for _, tc := range []struct {
		docType, text string
		want          doctype.Decision
	}{
		{"incident", "anything", doctype.Decision{Type: "incident"}},
		{"Incident", "anything", doctype.Decision{Type: "incident"}},
		{"postmortem", "anything", doctype.Decision{Type: "incident"}},
		{"post-mortem", "anything", doctype.Decision{Type: "incident"}},
		{"runbook", "anything", doctype.Decision{Type: "runbook"}},
		{"", pm, doctype.Decision{Type: "incident", Inferred: true}},
		{"", "How to rotate the signing keys: run the script, then check the dashboard.", doctype.Decision{Type: "document", Inferred: true}},
	} {
		got, err := d.Resolve(tc.docType, "", tc.text)
		require.NoError(t, err, tc.docType)
		require.Equal(t, tc.want, got, "%q %q", tc.docType, tc.text)
	}
	_, err := d.Resolve("banana", "", pm)
	require.ErrorIs(t, err, doctype.ErrUnknown)

}
