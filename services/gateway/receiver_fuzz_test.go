package gateway_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/gateway"
)

// The receivers FuzzWebhookReceiver signs for, each with its scheme (see
// hooksConfig), and the tenants they write.
var fuzzProviders = []string{"github", "gitlab", "jira", "relay", "gitlab2"}

var fuzzTenants = []string{"acme", "ops", "beta"}

// How a fuzzed delivery is signed.
const (
	signValid       = iota // with the receiver's secret over the body sent
	signNone               // no signature header at all
	signWrongSecret        // a well-formed signature under another secret
	signOtherBody          // the receiver's secret over another body
	signStale              // Standard Webhooks: valid but an hour old (others: valid)
	signModes
)

// signDelivery returns the headers a sender using mode sets on body for
// provider (its delivery id included).
func signDelivery(provider string, mode int, event, deliveryID string, body []byte, now time.Time) http.Header {
	secret := map[string]string{"github": ghSecret, "gitlab": glToken, "jira": jiraSecret, "relay": whSecret, "gitlab2": pdSecret}[provider]
	signed := body
	switch mode {
	case signWrongSecret:
		secret = "not the receiver's secret"
	case signOtherBody:
		signed = append(bytes.Clone(body), ' ')
	}
	h := http.Header{}
	mac := func(msg []byte) []byte {
		key := []byte(secret)
		if b64, ok := strings.CutPrefix(secret, "whsec_"); ok {
			// A Standard Webhooks secret is its key in base64.
			key, _ = base64.StdEncoding.DecodeString(b64)
		}
		m := hmac.New(sha256.New, key)
		m.Write(msg)
		return m.Sum(nil)
	}
	switch provider {
	case "github":
		h.Set("X-GitHub-Event", event)
		h.Set("X-GitHub-Delivery", deliveryID)
		if mode != signNone {
			h.Set("X-Hub-Signature-256", "sha256="+hexMAC(secret, signed))
		}
	case "gitlab":
		h.Set("X-Gitlab-Event-UUID", deliveryID)
		if mode != signNone {
			token := secret
			if mode == signOtherBody {
				token = secret + " "
			}
			h.Set("X-Gitlab-Token", token)
		}
	case "jira":
		h.Set("X-Atlassian-Webhook-Identifier", deliveryID)
		if mode != signNone {
			h.Set("X-Hub-Signature", "sha256="+hexMAC(secret, signed))
		}
	case "relay":
		h.Set("X-GitHub-Event", event)
		ts := now
		if mode == signStale {
			ts = now.Add(-time.Hour)
		}
		sec := strconv.FormatInt(ts.Unix(), 10)
		id := deliveryID
		if id == "" {
			id = "msg_fuzz"
		}
		if mode != signNone {
			h.Set("Webhook-Id", id)
			h.Set("Webhook-Timestamp", sec)
			msg := append([]byte(id+"."+sec+"."), signed...)
			h.Set("Webhook-Signature", "v1,"+base64.StdEncoding.EncodeToString(mac(msg)))
		}
	case "gitlab2":
		h.Set("X-Gitlab-Event-UUID", deliveryID)
		if mode != signNone {
			h.Set("X-PagerDuty-Signature", "v1="+hexMAC(secret, signed))
		}
	}
	return h
}

// receiverFuzz is one gateway with every receiver of hooksConfig on a
// real embedded JetStream and store, for a whole fuzz run.
type receiverFuzz struct {
	h   http.Handler
	reg *embedded.Store
}

func newReceiverFuzz(f *testing.F) *receiverFuzz {
	f.Helper()
	bus := streamtest.NewBus(f, streamtest.Options{})
	st, err := embedded.Open(filepath.Join(f.TempDir(), "kg.db"), embedded.Options{NoSync: true})
	require.NoError(f, err)
	f.Cleanup(func() { st.Close() })
	a, err := auth.New([]auth.Token{{Token: "w", Tenant: "acme", Principal: "writer", Writer: true}}, nil)
	require.NoError(f, err)
	g, err := gateway.New(gateway.Config{MaxBodyBytes: 1 << 16, Webhooks: hooksConfig()}, st, bus, a, nil, prometheus.NewRegistry())
	require.NoError(f, err)
	return &receiverFuzz{h: g.Handler(), reg: st}
}

func (rf *receiverFuzz) registry(t *testing.T) map[string][]provenance.SourceState {
	out := map[string][]provenance.SourceState{}
	for _, tn := range fuzzTenants {
		srcs, err := rf.reg.ListSources(t.Context(), tn)
		require.NoError(t, err)
		out[tn] = srcs
	}
	return out
}

// FuzzWebhookReceiver sends deliveries through the real handler of
// POST /webhooks/{provider}: signed with the receiver's secret (the HMAC
// computed here), unsigned, signed with another secret or over another
// body, or (Standard Webhooks) replayed an hour late; with a JSON or
// another content type. Every answer is JSON, 2xx or 4xx (an error code
// when refused); a refused delivery leaves the registry of every tenant
// as it was, and one not validly signed is always refused with 401; an
// accepted one names valid ids the registry holds and leaves nothing in
// the outbox.
func FuzzWebhookReceiver(f *testing.F) {
	seeds := map[string][]string{
		"github":  {"github/issues.opened.json", "github/issues.edited.json"},
		"relay":   {"github/issues.opened.json"},
		"gitlab":  {"gitlab/issue.json", "gitlab/wiki_page.json"},
		"gitlab2": {"gitlab/issue.json"},
		"jira":    {"jira/issue_created.json"},
	}
	for pi, p := range fuzzProviders {
		for _, rel := range seeds[p] {
			body, err := os.ReadFile(filepath.Join("testdata", "webhooks", rel))
			require.NoError(f, err)
			for mode := range signModes {
				f.Add(uint8(pi), uint8(mode), "issues", "d-"+strconv.Itoa(mode), body)
			}
			f.Add(uint8(pi), uint8(signValid|8), "issues", "", body) // text/plain
		}
	}
	f.Add(uint8(0), uint8(signValid), "issue_comment", "c-1", []byte(`{"action":"deleted","issue":{"number":1},"repository":{"full_name":"a/b"}}`))
	f.Add(uint8(0), uint8(signValid), "gollum", "g-1", []byte(`{"pages":[{"page_name":"Home","action":"edited"}],"repository":{"full_name":"a/b"}}`))
	f.Add(uint8(2), uint8(signValid), "", "j-1", []byte(`{"webhookEvent":"jira:issue_deleted","issue":{"key":"A-1"}}`))
	f.Add(uint8(1), uint8(signValid), "", "", []byte(`{"object_kind":"issue","object_attributes":{"iid":1,"title":"t","description":"x","updated_at":"2025-01-01 00:00:00 UTC","action":"close"},"project":{"path_with_namespace":"g/p"}}`))
	f.Add(uint8(0), uint8(signValid), "ping", "p-1", []byte(`{}`))
	f.Add(uint8(0), uint8(signValid), "issues", "x", []byte(`not json`))

	rf := newReceiverFuzz(f)
	f.Fuzz(func(t *testing.T, provider, mode uint8, event, deliveryID string, body []byte) {
		p := fuzzProviders[int(provider)%len(fuzzProviders)]
		sign := int(mode&7) % signModes
		now := time.Now()
		req := httptest.NewRequest(http.MethodPost, "/webhooks/"+p, bytes.NewReader(body))
		for k, vs := range signDelivery(p, sign, event, deliveryID, body, now) {
			for _, v := range vs {
				req.Header.Add(k, v)
			}
		}
		if mode&8 == 0 {
			req.Header.Set("Content-Type", "application/json")
		} else {
			req.Header.Set("Content-Type", "text/plain")
		}
		before := rf.registry(t)
		rec := httptest.NewRecorder()
		rf.h.ServeHTTP(rec, req)

		var out map[string]any
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out), "every answer is JSON: %d %s", rec.Code, rec.Body)
		require.True(t, rec.Code/100 == 2 || rec.Code/100 == 4, "status %d: %v", rec.Code, out)
		validlySigned := sign == signValid || (sign == signStale && p != "relay")
		if !validlySigned {
			require.Equal(t, http.StatusUnauthorized, rec.Code, "a delivery signed with mode %d was not refused: %v", sign, out)
		}
		if rec.Code/100 == 4 {
			e, _ := out["error"].(map[string]any)
			require.NotEmpty(t, e["code"], "%v", out)
			require.Equal(t, before, rf.registry(t), "a refused delivery (%d %v) changed the registry", rec.Code, out)
			return
		}
		var acc gateway.WebhookAccepted
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &acc))
		tenant := map[string]string{"github": "acme", "gitlab": "acme", "jira": "ops", "relay": "acme", "gitlab2": "beta"}[p]
		for _, d := range acc.Documents {
			require.NoError(t, provenance.ValidateDocID(d.ID), "%q", d.ID)
			if d.Stale || d.Ignored != "" {
				continue
			}
			srcs, err := rf.reg.Sources(t.Context(), tenant, []string{d.ID})
			require.NoError(t, err)
			require.Contains(t, srcs, d.ID, "an accepted document is in the registry")
			require.GreaterOrEqual(t, srcs[d.ID].Version, d.Version)
		}
		n, err := rf.reg.PendingCount(t.Context())
		require.NoError(t, err)
		require.Zero(t, n, "an accepted delivery's events are all acknowledged")
	})
}
