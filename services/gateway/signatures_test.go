package gateway

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type signatureVector struct {
	Provider         string `json:"provider"`
	Header           string `json:"header"`
	Secret           string `json:"secret"`
	Body             string `json:"body"`
	Expected         string `json:"expected"`
	WebhookID        string `json:"webhook-id"`
	WebhookTimestamp int64  `json:"webhook-timestamp"`
	Recomputed       bool   `json:"recomputed"`
}

func mustVerifier(t *testing.T, scheme, header string, secrets ...string) *verifier {
	t.Helper()
	v, err := newVerifier(scheme, header, secrets, 0)
	require.NoError(t, err)
	return v
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// checkGitHubVector checks the GitHub scheme (HMAC-SHA256 in
// X-Hub-Signature-256) against one vector.
func checkGitHubVector(t *testing.T, vec signatureVector) {
	t.Helper()
	require.Equal(t, "X-Hub-Signature-256", vec.Header)
	v := mustVerifier(t, SchemeHMACSHA256, "", vec.Secret)
	now := time.Now()
	require.NoError(t, v.verify(hdr(vec.Header, vec.Expected), []byte(vec.Body), now))
	// Rotation: the old secret first, the vector's second.
	require.NoError(t, mustVerifier(t, SchemeHMACSHA256, "", "old secret", vec.Secret).verify(hdr(vec.Header, vec.Expected), []byte(vec.Body), now))

	require.ErrorIs(t, v.verify(hdr(vec.Header, vec.Expected), []byte(vec.Body+" "), now), ErrBadSignature, "body changed")
	require.ErrorIs(t, mustVerifier(t, SchemeHMACSHA256, "", "wrong").verify(hdr(vec.Header, vec.Expected), []byte(vec.Body), now), ErrBadSignature)
	require.ErrorIs(t, v.verify(hdr(vec.Header, vec.Expected[len("sha256="):]), []byte(vec.Body), now), ErrBadSignature, "no sha256= prefix")
	require.ErrorIs(t, v.verify(hdr(vec.Header, "sha256=zz"), []byte(vec.Body), now), ErrBadSignature, "not hex")
	require.ErrorIs(t, v.verify(http.Header{}, []byte(vec.Body), now), ErrUnsigned)
	// The legacy SHA-1 header alone is not accepted.
	require.ErrorIs(t, v.verify(hdr("X-Hub-Signature", vec.Expected), []byte(vec.Body), now), ErrUnsigned)
	// Jira admin webhooks: the same scheme in X-Hub-Signature.
	j := mustVerifier(t, SchemeHMACSHA256, "X-Hub-Signature", vec.Secret)
	require.NoError(t, j.verify(hdr("X-Hub-Signature", vec.Expected), []byte(vec.Body), now))
}

// checkPagerDutyVector checks the PagerDuty v3 scheme against one vector.
func checkPagerDutyVector(t *testing.T, vec signatureVector) {
	t.Helper()
	require.Equal(t, "X-PagerDuty-Signature", vec.Header)
	v := mustVerifier(t, SchemePagerDutyV3, "", vec.Secret)
	now := time.Now()
	body := []byte(vec.Body)
	require.NoError(t, v.verify(hdr(vec.Header, vec.Expected), body, now))
	// During rotation PagerDuty sends one signature per secret.
	other := hmac.New(sha256.New, []byte("the next secret"))
	other.Write(body)
	rotated := "v1=" + hex.EncodeToString(other.Sum(nil)) + ", " + vec.Expected
	require.NoError(t, v.verify(hdr(vec.Header, rotated), body, now))
	require.NoError(t, mustVerifier(t, SchemePagerDutyV3, "", "the next secret").verify(hdr(vec.Header, rotated), body, now))
	require.NoError(t, v.verify(hdr(vec.Header, "v2=abcd,"+vec.Expected), body, now), "unknown versions are skipped")

	require.ErrorIs(t, v.verify(hdr(vec.Header, "v1="+hex.EncodeToString(other.Sum(nil))), body, now), ErrBadSignature)
	require.ErrorIs(t, v.verify(hdr(vec.Header, vec.Expected), append([]byte{' '}, body...), now), ErrBadSignature)
	require.ErrorIs(t, v.verify(hdr(vec.Header, "0c0b9495"), body, now), ErrBadSignature, "no v1= prefix")
	require.ErrorIs(t, v.verify(http.Header{}, body, now), ErrUnsigned)
}

// checkStandardWebhooksVector checks the Standard Webhooks scheme against
// one vector, whose timestamp lies well in the past.
func checkStandardWebhooksVector(t *testing.T, vec signatureVector) {
	t.Helper()
	v := mustVerifier(t, SchemeStandardWebhooks, "", vec.Secret)
	ts := strconv.FormatInt(vec.WebhookTimestamp, 10)
	at := time.Unix(vec.WebhookTimestamp, 0)
	body := []byte(vec.Body)
	h := hdr("webhook-id", vec.WebhookID, "webhook-timestamp", ts, "webhook-signature", vec.Expected)
	require.NoError(t, v.verify(h, body, at))
	require.NoError(t, v.verify(h, body, at.Add(4*time.Minute)), "within the tolerance")
	// A space-separated list: a rotated-out signature first, then the valid one.
	h2 := hdr("webhook-id", vec.WebhookID, "webhook-timestamp", ts,
		"webhook-signature", "v1,"+base64.StdEncoding.EncodeToString([]byte("nope"))+" v1a,xyz "+vec.Expected)
	require.NoError(t, v.verify(h2, body, at))

	// Replayed later (or clock far ahead): refused however valid the MAC.
	require.ErrorIs(t, v.verify(h, body, at.Add(6*time.Minute)), ErrStaleSignature)
	require.ErrorIs(t, v.verify(h, body, at.Add(-6*time.Minute)), ErrStaleSignature)
	require.ErrorIs(t, v.verify(h, body, time.Now()), ErrStaleSignature)
	// The id and the timestamp are signed too.
	require.ErrorIs(t, v.verify(hdr("webhook-id", "msg_other", "webhook-timestamp", ts, "webhook-signature", vec.Expected), body, at), ErrBadSignature)
	ts1 := strconv.FormatInt(vec.WebhookTimestamp+1, 10)
	require.ErrorIs(t, v.verify(hdr("webhook-id", vec.WebhookID, "webhook-timestamp", ts1, "webhook-signature", vec.Expected), body, at), ErrBadSignature)
	require.ErrorIs(t, v.verify(h, []byte(`{"test": 2432232315}`), at), ErrBadSignature)
	require.ErrorIs(t, mustVerifier(t, SchemeStandardWebhooks, "", "whsec_"+base64.StdEncoding.EncodeToString([]byte("other key"))).verify(h, body, at), ErrBadSignature)
	require.ErrorIs(t, v.verify(hdr("webhook-id", vec.WebhookID, "webhook-timestamp", "soon", "webhook-signature", vec.Expected), body, at), ErrBadSignature)
	for _, missing := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
		h := h.Clone()
		h.Del(missing)
		require.ErrorIs(t, v.verify(h, body, at), ErrUnsigned, missing)
	}
	// A tighter tolerance is honoured.
	tight, err := newVerifier(SchemeStandardWebhooks, "", []string{vec.Secret}, 30*time.Second)
	require.NoError(t, err)
	require.ErrorIs(t, tight.verify(h, body, at.Add(time.Minute)), ErrStaleSignature)
}

// computedVectors are vectors of this package's own: secrets and bodies
// written here, the expected signatures computed with crypto/hmac.
func computedVectors(t *testing.T) map[string]signatureVector {
	t.Helper()
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	body := `{"event":"incident.resolved","id":"PM-4","service":"ledger-api"}`
	gh := signatureVector{Provider: "github", Header: "X-Hub-Signature-256", Secret: "ledger hook secret", Body: body}
	gh.Expected = "sha256=" + hex.EncodeToString(mac([]byte(gh.Secret), body))
	pd := signatureVector{Provider: "pagerduty-v3", Header: "X-PagerDuty-Signature", Secret: "pd-ledger-secret", Body: body}
	pd.Expected = "v1=" + hex.EncodeToString(mac([]byte(pd.Secret), body))
	key := []byte("standard webhooks key of the test")
	sw := signatureVector{Provider: "standard-webhooks", Secret: "whsec_" + base64.StdEncoding.EncodeToString(key), Body: body,
		WebhookID: "msg_ledger_4", WebhookTimestamp: 1740000000}
	sw.Expected = "v1," + base64.StdEncoding.EncodeToString(mac(key, sw.WebhookID+"."+strconv.FormatInt(sw.WebhookTimestamp, 10)+"."+body))
	return map[string]signatureVector{gh.Provider: gh, pd.Provider: pd, sw.Provider: sw}
}

func TestSignatureGitHubComputed(t *testing.T) { checkGitHubVector(t, computedVectors(t)["github"]) }

func TestSignaturePagerDutyComputed(t *testing.T) {
	checkPagerDutyVector(t, computedVectors(t)["pagerduty-v3"])
}

func TestSignatureStandardWebhooksComputed(t *testing.T) {
	checkStandardWebhooksVector(t, computedVectors(t)["standard-webhooks"])
}

func TestSignatureGitLabToken(t *testing.T) {
	v := mustVerifier(t, SchemeGitLabToken, "", "s3cret-token", "rotated-token")
	now := time.Now()
	require.NoError(t, v.verify(hdr("X-Gitlab-Token", "s3cret-token"), nil, now))
	require.NoError(t, v.verify(hdr("X-Gitlab-Token", "rotated-token"), nil, now))
	require.ErrorIs(t, v.verify(hdr("X-Gitlab-Token", "s3cret-toke"), nil, now), ErrBadSignature, "a prefix is no match")
	require.ErrorIs(t, v.verify(hdr("X-Gitlab-Token", "s3cret-token2"), nil, now), ErrBadSignature)
	require.ErrorIs(t, v.verify(http.Header{}, nil, now), ErrUnsigned)
}

func TestNewVerifierRejects(t *testing.T) {
	for name, c := range map[string]struct {
		scheme, header string
		secrets        []string
	}{
		"no secret":            {SchemeHMACSHA256, "", nil},
		"empty secret":         {SchemeGitLabToken, "", []string{""}},
		"unknown scheme":       {"md5", "", []string{"x"}},
		"header on pagerduty":  {SchemePagerDutyV3, "X-Sig", []string{"x"}},
		"whsec not base64":     {SchemeStandardWebhooks, "", []string{"whsec_***"}},
		"whsec empty key":      {SchemeStandardWebhooks, "", []string{"whsec_"}},
		"header on standard":   {SchemeStandardWebhooks, "X-Sig", []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}},
		"header on gitlab tok": {SchemeGitLabToken, "X-Sig", []string{"x"}},
	} {
		_, err := newVerifier(c.scheme, c.header, c.secrets, 0)
		require.Error(t, err, name)
	}
}
