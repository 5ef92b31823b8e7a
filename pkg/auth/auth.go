// Package auth maps bearer tokens to callers. Tokens come from a JSON file
// (`--tokens FILE` or KG_TOKENS_FILE): an array of
// {"token","tenant","principal","groups":[...],"admin"?}.
package auth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/kgstream/kgstream/pkg/errkind"
	"github.com/kgstream/kgstream/pkg/provenance"
)

// Sentinel errors callers branch on.
var (
	// ErrUnauthenticated means no valid credentials were presented.
	ErrUnauthenticated = errkind.New(errkind.Unauthorized, "unauthenticated")
)

// Token is one entry of the tokens file.
type Token struct {
	Token     string   `json:"token"`
	Tenant    string   `json:"tenant"`
	Principal string   `json:"principal"`
	Groups    []string `json:"groups,omitempty"`
	// Admin lets the principal write to other tenants.
	Admin bool `json:"admin,omitempty"`
	// Writer lets the principal write every document of its tenant, also
	// ones it cannot read (an ingestion service account).
	Writer bool `json:"writer,omitempty"`
}

// Authenticator resolves requests to callers.
type Authenticator struct {
	byHash map[[32]byte]provenance.Caller
	// anonymous, when set, is the caller of requests without a token.
	anonymous *provenance.Caller
}

// AnonymousCaller is the caller `kgstream up` admits without a tokens file:
// tenant default, no groups, so only public documents are readable.
var AnonymousCaller = provenance.Caller{Tenant: "default", Principal: "anonymous"}

// DevCaller is the caller of `kgstream up` without a tokens file: a
// single-user development mode, where the one user is an admin of tenant
// default, so what they create they can also change and delete (reads still
// obey ACLs). It is served on loopback addresses only.
var DevCaller = provenance.Caller{Tenant: "default", Principal: "anonymous", Admin: true}

// New builds an Authenticator from tokens. anonymous (may be nil) is used
// for requests without an Authorization header.
func New(tokens []Token, anonymous *provenance.Caller) (*Authenticator, error) {
	a := &Authenticator{byHash: make(map[[32]byte]provenance.Caller, len(tokens)), anonymous: anonymous}
	for i, t := range tokens {
		if t.Token == "" {
			return nil, fmt.Errorf("token %d: token is empty", i)
		}
		if err := provenance.ValidateTenant(t.Tenant); err != nil {
			return nil, fmt.Errorf("token %d: %w", i, err)
		}
		if strings.TrimSpace(t.Principal) == "" {
			return nil, fmt.Errorf("token %d: principal is empty", i)
		}
		for _, g := range t.Groups {
			if strings.TrimSpace(g) == "" {
				return nil, fmt.Errorf("token %d: a group name is empty", i)
			}
		}
		h := sha256.Sum256([]byte(t.Token))
		if _, dup := a.byHash[h]; dup {
			return nil, fmt.Errorf("token %d: duplicate token", i)
		}
		a.byHash[h] = provenance.Caller{Tenant: t.Tenant, Principal: t.Principal, Groups: t.Groups, Admin: t.Admin, Writer: t.Writer}
	}
	return a, nil
}

// LoadFile reads a tokens file.
func LoadFile(path string) ([]Token, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading tokens file: %w", err)
	}
	ts, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("parsing tokens file %s: %w", path, err)
	}
	return ts, nil
}

// Parse decodes a tokens file strictly: a misspelt key ("admn", "group")
// would silently drop a right or a restriction, so unknown keys, trailing
// data and a null file are errors.
func Parse(data []byte) ([]Token, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var ts []Token
	if err := dec.Decode(&ts); err != nil {
		return nil, fmt.Errorf("decoding tokens: %w", err)
	}
	if ts == nil {
		return nil, errors.New("decoding tokens: the file must be a JSON array of tokens")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("decoding tokens: trailing data after the array")
	}
	return ts, nil
}

// Authenticate returns the caller of r.
func (a *Authenticator) Authenticate(r *http.Request) (provenance.Caller, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		if a.anonymous != nil {
			return *a.anonymous, nil
		}
		return provenance.Caller{}, fmt.Errorf("%w: missing bearer token", ErrUnauthenticated)
	}
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || tok == "" {
		return provenance.Caller{}, fmt.Errorf("%w: Authorization must be 'Bearer <token>'", ErrUnauthenticated)
	}
	sum := sha256.Sum256([]byte(tok))
	// Map lookup by hash, then a constant-time compare of the hash, so
	// timing says nothing about token prefixes.
	for k, c := range a.byHash {
		if subtle.ConstantTimeCompare(k[:], sum[:]) == 1 {
			return c, nil
		}
	}
	return provenance.Caller{}, fmt.Errorf("%w: unknown token", ErrUnauthenticated)
}

type ctxKey struct{}

// WithCaller stores c in ctx.
func WithCaller(ctx context.Context, c provenance.Caller) context.Context {
	return context.WithValue(ctx, ctxKey{}, c)
}

// CallerFrom returns the caller stored by WithCaller.
func CallerFrom(ctx context.Context) (provenance.Caller, bool) {
	c, ok := ctx.Value(ctxKey{}).(provenance.Caller)
	return c, ok
}
