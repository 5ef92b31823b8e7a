//go:build integration

package app_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
)

// TestWebhookToGraph: a signed GitHub issues webhook through the all-in-one
// becomes a document in the graph; a badly signed one changes nothing.
func TestWebhookToGraph(t *testing.T) {
	body, err := os.ReadFile("../../../../shared/webhooks/github/issues.opened.payload.json")
	require.NoError(t, err, "the webhook payloads must be at ../shared beside the checkout")
	cfg := filepath.Join(t.TempDir(), "webhooks.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("providers:\n  github: {secrets: [s3cret], tenant: default, acl: {public: true}}\n"), 0o600))
	a := startApp(t, app.Config{WebhooksFile: cfg})
	post := func(sig string) int {
		req, _ := http.NewRequest(http.MethodPost, a.URL()+"/webhooks/github", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "issues")
		req.Header.Set("X-GitHub-Delivery", "d-1")
		req.Header.Set("X-Hub-Signature-256", sig)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusUnauthorized, post("sha256=00"))
	mac := hmac.New(sha256.New, []byte("s3cret"))
	mac.Write(body)
	require.Equal(t, http.StatusAccepted, post("sha256="+hex.EncodeToString(mac.Sum(nil))))
	c := app.NewClient(a.URL(), "")
	require.NoError(t, c.WaitFor(t.Context(), 30*time.Second, func() (bool, error) {
		var st statusResp
		err := c.Do(t.Context(), http.MethodGet, "/v1/status", "", nil, &st)
		return st.Applied == 1, err
	}))
	var list struct {
		Entities []entity `json:"entities"`
	}
	require.NoError(t, c.Do(t.Context(), http.MethodGet, "/v1/entities?type=ticket", "", nil, &list))
	require.Len(t, list.Entities, 1)
	require.Contains(t, list.Entities[0].Name, "Codertocat")
}
