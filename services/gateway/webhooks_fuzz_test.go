package gateway

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
)

// payloadDirs hold provider directories of payloads for the fuzz seed
// corpora: this package's own, and in the integration build the shared
// real ones. Each must hold payloads for every provider fuzzed.
var payloadDirs = []string{filepath.Join("testdata", "webhooks")}

// seedPayloads adds every payload of a provider directory to f.
func seedPayloads(f *testing.F, dir string, add func(body []byte)) {
	f.Helper()
	for _, root := range payloadDirs {
		paths, err := filepath.Glob(filepath.Join(root, dir, "*.json"))
		if err != nil || len(paths) == 0 {
			f.Fatalf("no %s payloads in %s (found %d): %v", dir, root, len(paths), err)
		}
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			add(data)
		}
	}
}

// checkDelivery is what every decoded delivery must satisfy, whatever the
// input: ignored or some ops, each with a valid id, changes with text.
func checkDelivery(t *testing.T, d delivery, err error) {
	if err != nil {
		return
	}
	if d.ignored != "" {
		require.Empty(t, d.ops)
		return
	}
	require.NotEmpty(t, d.ops)
	for _, op := range d.ops {
		require.NoError(t, provenance.ValidateDocID(op.docID))
		require.GreaterOrEqual(t, op.version, int64(0))
		switch op.kind {
		case opChange:
			require.NotEmpty(t, strings.TrimSpace(op.text))
		case opDelete, opWithdraw:
		default:
			t.Fatalf("unknown op kind %d", op.kind)
		}
	}
}

func FuzzDecodeGitHub(f *testing.F) {
	seedPayloads(f, "github", func(body []byte) {
		for _, ev := range []string{"issues", "issue_comment", "gollum"} {
			f.Add(ev, body)
		}
	})
	f.Add("ping", []byte(`{}`))
	f.Fuzz(func(t *testing.T, event string, body []byte) {
		d, err := decodeDelivery(KindGitHub, http.Header{"X-Github-Event": {event}}, body, "")
		checkDelivery(t, d, err)
	})
}

func FuzzDecodeGitLab(f *testing.F) {
	seedPayloads(f, "gitlab", func(body []byte) { f.Add(body) })
	f.Fuzz(func(t *testing.T, body []byte) {
		d, err := decodeDelivery(KindGitLab, http.Header{}, body, "")
		checkDelivery(t, d, err)
	})
}

func FuzzDecodeJira(f *testing.F) {
	seedPayloads(f, "jira", func(body []byte) { f.Add(body) })
	f.Add([]byte(`{"webhookEvent":"jira:issue_created","issue":{"key":"A-1","fields":{"summary":"s","description":{"type":"doc","content":[{"type":"paragraph","content":[{"type":"text","text":"x"}]}]}}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		d, err := decodeDelivery(KindJira, http.Header{}, body, "")
		checkDelivery(t, d, err)
	})
}

// FuzzDocID checks the id encoding is reversible (distinct names never
// share an id) and yields valid ids for names of a valid length.
func FuzzDocID(f *testing.F) {
	for _, s := range []string{"Codertocat/Hello-World#1", "a/b/c page%2F", "x\x00y\x7f", "üñí/☃", "Home ", "a\u202eb", "a\xffb", "end\u200b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		id := docID("p:", name)
		back, err := url.PathUnescape(strings.TrimPrefix(id, "p:"))
		require.NoError(t, err)
		require.Equal(t, name, back)
		require.Equal(t, strings.Count(name, "/"), strings.Count(id, "/"), "'/' is kept")
		if len(id) <= provenance.MaxDocIDBytes {
			require.NoError(t, provenance.ValidateDocID(id), "%q", name)
		}
	})
}

func TestADFText(t *testing.T) {
	got, err := adfText([]byte(`{"type":"doc","version":1,"content":[
		{"type":"heading","content":[{"type":"text","text":"Impact"}]},
		{"type":"paragraph","content":[{"type":"text","text":"checkout "},{"type":"text","text":"down"},{"type":"hardBreak"},{"type":"text","text":"for 5m"}]}]}`))
	require.NoError(t, err)
	require.Equal(t, "Impact\ncheckout down\nfor 5m", got)
	got, err = adfText([]byte(`"plain *wiki* markup"`))
	require.NoError(t, err)
	require.Equal(t, "plain *wiki* markup", got)
	got, err = adfText([]byte(`null`))
	require.NoError(t, err)
	require.Empty(t, got)
	_, err = adfText([]byte(`42`))
	require.Error(t, err)
}
