package gateway_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The document API checks doc_type against the configured types: a
// synonym is taken as its type, a missing one is inferred from the text,
// and the answer says which; a free-form value is refused and changes
// nothing. The event carries the type taken.
func TestDocTypeIsCheckedAndReported(t *testing.T) {
	f := setup(t)
	pm := `Impact: checkout failed for customers. Root cause: an expired certificate. Timeline: 10:02 UTC alerted. Resolution: renewed.`
	for _, tc := range []struct {
		id, docType, text, want string
		inferred                bool
	}{
		{"a", `"incident"`, "checkout was slow", "incident", false},
		{"b", `"Postmortem"`, "checkout was slow", "incident", false},
		{"c", `"wiki"`, "how we deploy", "page", false},
		{"d", `""`, pm, "incident", true},
		{"e", "", pm, "incident", true},
		{"f", "", "How to rotate the signing keys: run the script.", "document", true},
	} {
		body := `{"id":"` + tc.id + `","text":"` + tc.text + `"`
		if tc.docType != "" {
			body += `,"doc_type":` + tc.docType
		}
		status, out := f.do(t, "POST", "/v1/documents", "w", body+`}`)
		require.Equal(t, 202, status, "%s: %v", tc.id, out)
		require.Equal(t, tc.want, out["doc_type"], tc.id)
		inferred, _ := out["doc_type_inferred"].(bool)
		require.Equal(t, tc.inferred, inferred, tc.id)
		require.Equal(t, tc.want, f.changed(t, out["event_id"].(string)).DocType, "the event of %s carries the type taken", tc.id)
	}
	for _, dt := range []string{`"banana"`, `"post mortem report"`} {
		out := f.refused(t, 400, "POST", "/v1/documents", "w", `{"id":"g","text":"x","doc_type":`+dt+`}`)
		require.Equal(t, "unknown_doc_type", errCode(out))
		require.Contains(t, out["error"].(map[string]any)["message"], "incident")
	}
	// An identical resend is unchanged and still names the type.
	status, out := f.do(t, "POST", "/v1/documents", "w", `{"id":"b","text":"checkout was slow","doc_type":"postmortem"}`)
	require.Equal(t, 200, status, out)
	require.Equal(t, true, out["unchanged"])
	require.Equal(t, "incident", out["doc_type"])
}
