//go:build integration

package gateway

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// sharedDir is /work/shared seen from the package directory.
var sharedDir = filepath.Join("..", "..", "..", "shared")

func init() { payloadDirs = append(payloadDirs, filepath.Join(sharedDir, "webhooks")) }

// loadVectors reads the shared signature test vectors; a missing file fails
// the test (the vectors are what proves the schemes interoperate).
func loadVectors(t *testing.T) map[string]signatureVector {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(sharedDir, "webhooks", "signature_test_vectors.json"))
	require.NoError(t, err, "the shared signature test vectors are required")
	var vs []signatureVector
	require.NoError(t, json.Unmarshal(data, &vs))
	out := map[string]signatureVector{}
	for _, v := range vs {
		if v.Recomputed {
			out[v.Provider] = v
		}
	}
	for _, name := range []string{"github", "pagerduty-v3", "incident.io (Svix / Standard Webhooks)"} {
		require.Contains(t, out, name, "vector %q is missing", name)
	}
	return out
}

func TestSignatureGitHubVector(t *testing.T) { checkGitHubVector(t, loadVectors(t)["github"]) }

func TestSignaturePagerDutyVector(t *testing.T) {
	checkPagerDutyVector(t, loadVectors(t)["pagerduty-v3"])
}

func TestSignatureStandardWebhooksVector(t *testing.T) {
	checkStandardWebhooksVector(t, loadVectors(t)["incident.io (Svix / Standard Webhooks)"])
}
