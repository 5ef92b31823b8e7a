package gateway

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Signature schemes a webhook provider can be configured with. They are
// generic: any provider kind may use any scheme (a Jira admin webhook signs
// like GitHub, GitLab's signing tokens follow Standard Webhooks).
const (
	// SchemeHMACSHA256 is GitHub's scheme: "sha256=" + hex(HMAC-SHA256(secret,
	// body)) in X-Hub-Signature-256 (the header is configurable; Jira admin
	// webhooks use X-Hub-Signature).
	SchemeHMACSHA256 = "hmac-sha256"
	// SchemeGitLabToken is GitLab's shared secret echoed in X-Gitlab-Token.
	SchemeGitLabToken = "gitlab-token"
	// SchemePagerDutyV3 is PagerDuty's v3 scheme: X-PagerDuty-Signature holds
	// a comma-separated list of "v1=" + hex(HMAC-SHA256(secret, body)), more
	// than one while a secret is being rotated.
	SchemePagerDutyV3 = "pagerduty-v3"
	// SchemeStandardWebhooks is https://www.standardwebhooks.com (Svix,
	// incident.io, GitLab signing tokens): webhook-signature holds a
	// space-separated list of "v1," + base64(HMAC-SHA256(key, id + "." +
	// timestamp + "." + body)) with the key base64-decoded from a "whsec_"
	// secret; webhook-timestamp must be within the tolerance of now.
	SchemeStandardWebhooks = "standard-webhooks"
)

// Signature verification errors; every one is answered 401.
var (
	// ErrUnsigned means the request lacks the scheme's signature headers.
	ErrUnsigned = errors.New("the request is not signed")
	// ErrBadSignature means no signature matches any configured secret.
	ErrBadSignature = errors.New("the signature does not match")
	// ErrStaleSignature means a timestamped signature is too old (a replay)
	// or too far in the future.
	ErrStaleSignature = errors.New("the signature timestamp is outside the tolerance")
)

// Default headers of the schemes.
const (
	headerHubSignature256  = "X-Hub-Signature-256"
	headerGitLabToken      = "X-Gitlab-Token"
	headerPagerDuty        = "X-PagerDuty-Signature"
	headerWebhookID        = "Webhook-Id"
	headerWebhookTimestamp = "Webhook-Timestamp"
	headerWebhookSignature = "Webhook-Signature"
)

// defaultTolerance is how far a Standard Webhooks timestamp may be from now.
const defaultTolerance = 5 * time.Minute

// verifier checks one provider's signatures. Several secrets may be
// configured at once so a secret can be rotated without losing deliveries.
type verifier struct {
	scheme    string
	header    string
	keys      [][]byte
	tolerance time.Duration
}

// newVerifier builds the verifier of scheme with secrets. header overrides
// the signature header of SchemeHMACSHA256.
func newVerifier(scheme, header string, secrets []string, tolerance time.Duration) (*verifier, error) {
	if len(secrets) == 0 {
		return nil, errors.New("no secret configured")
	}
	v := &verifier{scheme: scheme, tolerance: tolerance}
	if v.tolerance <= 0 {
		v.tolerance = defaultTolerance
	}
	switch scheme {
	case SchemeHMACSHA256:
		v.header = headerHubSignature256
		if header != "" {
			v.header = header
		}
	case SchemeGitLabToken, SchemePagerDutyV3, SchemeStandardWebhooks:
	default:
		return nil, fmt.Errorf("unknown signature scheme %q (want %s, %s, %s or %s)", scheme,
			SchemeHMACSHA256, SchemeGitLabToken, SchemePagerDutyV3, SchemeStandardWebhooks)
	}
	if header != "" && scheme != SchemeHMACSHA256 {
		return nil, fmt.Errorf("signature_header applies to %s only", SchemeHMACSHA256)
	}
	for i, s := range secrets {
		if s == "" {
			return nil, fmt.Errorf("secret %d is empty", i)
		}
		key := []byte(s)
		if scheme == SchemeStandardWebhooks {
			k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
			if err != nil || len(k) == 0 {
				return nil, fmt.Errorf("secret %d: a Standard Webhooks secret is whsec_ followed by base64", i)
			}
			key = k
		}
		v.keys = append(v.keys, key)
	}
	return v, nil
}

// verify checks the signature of body in h at time now.
func (v *verifier) verify(h http.Header, body []byte, now time.Time) error {
	switch v.scheme {
	case SchemeHMACSHA256:
		return v.verifyHMAC(h.Get(v.header), body)
	case SchemeGitLabToken:
		return v.verifyToken(h.Get(headerGitLabToken))
	case SchemePagerDutyV3:
		return v.verifyPagerDuty(h.Get(headerPagerDuty), body)
	case SchemeStandardWebhooks:
		return v.verifyStandard(h, body, now)
	}
	return fmt.Errorf("%w: unknown scheme %q", ErrBadSignature, v.scheme)
}

func (v *verifier) verifyHMAC(value string, body []byte) error {
	if value == "" {
		return fmt.Errorf("%w: %s is missing", ErrUnsigned, v.header)
	}
	hexSig, ok := strings.CutPrefix(value, "sha256=")
	if !ok {
		return fmt.Errorf("%w: %s must be sha256=<hex>", ErrBadSignature, v.header)
	}
	sig, err := hex.DecodeString(hexSig)
	if err != nil {
		return fmt.Errorf("%w: %s is not hex", ErrBadSignature, v.header)
	}
	if !v.anyMAC(body, sig) {
		return fmt.Errorf("%w: %s", ErrBadSignature, v.header)
	}
	return nil
}

// verifyToken compares digests so neither the length nor a prefix of the
// secret leaks through timing.
func (v *verifier) verifyToken(token string) error {
	if token == "" {
		return fmt.Errorf("%w: %s is missing", ErrUnsigned, headerGitLabToken)
	}
	got := sha256.Sum256([]byte(token))
	match := 0
	for _, k := range v.keys {
		want := sha256.Sum256(k)
		match |= subtle.ConstantTimeCompare(got[:], want[:])
	}
	if match != 1 {
		return fmt.Errorf("%w: %s", ErrBadSignature, headerGitLabToken)
	}
	return nil
}

func (v *verifier) verifyPagerDuty(value string, body []byte) error {
	if value == "" {
		return fmt.Errorf("%w: %s is missing", ErrUnsigned, headerPagerDuty)
	}
	for part := range strings.SplitSeq(value, ",") {
		hexSig, ok := strings.CutPrefix(strings.TrimSpace(part), "v1=")
		if !ok {
			continue // a future version this receiver does not know
		}
		if sig, err := hex.DecodeString(hexSig); err == nil && v.anyMAC(body, sig) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ErrBadSignature, headerPagerDuty)
}

func (v *verifier) verifyStandard(h http.Header, body []byte, now time.Time) error {
	id, ts, sigs := h.Get(headerWebhookID), h.Get(headerWebhookTimestamp), h.Get(headerWebhookSignature)
	if id == "" || ts == "" || sigs == "" {
		return fmt.Errorf("%w: webhook-id, webhook-timestamp and webhook-signature are required", ErrUnsigned)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: webhook-timestamp %q is not unix seconds", ErrBadSignature, ts)
	}
	// Checked before the MAC so a replay of a captured delivery is refused
	// however valid its signature.
	if d := now.Sub(time.Unix(sec, 0)); d > v.tolerance || d < -v.tolerance {
		return fmt.Errorf("%w: webhook-timestamp is %s away from now (tolerance %s)", ErrStaleSignature, d.Round(time.Second), v.tolerance)
	}
	signed := make([]byte, 0, len(id)+len(ts)+len(body)+2)
	signed = append(append(append(append(append(signed, id...), '.'), ts...), '.'), body...)
	for part := range strings.FieldsSeq(sigs) {
		b64, ok := strings.CutPrefix(part, "v1,")
		if !ok {
			continue // v1a (asymmetric) and future versions
		}
		if sig, err := base64.StdEncoding.DecodeString(b64); err == nil && v.anyMAC(signed, sig) {
			return nil
		}
	}
	return fmt.Errorf("%w: webhook-signature", ErrBadSignature)
}

// anyMAC reports whether sig is the HMAC-SHA256 of msg under any key.
func (v *verifier) anyMAC(msg, sig []byte) bool {
	ok := false
	for _, k := range v.keys {
		m := hmac.New(sha256.New, k)
		m.Write(msg)
		ok = hmac.Equal(m.Sum(nil), sig) || ok
	}
	return ok
}
