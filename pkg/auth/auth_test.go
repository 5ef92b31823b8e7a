package auth_test

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/provenance"
)

func TestParseIsStrict(t *testing.T) {
	for _, c := range []struct {
		name, data, err string
	}{
		{"ok", `[{"token":"t","tenant":"acme","principal":"p","groups":["sre"],"writer":true,"admin":false}]`, ""},
		{"empty array", `[]`, ""},
		{"misspelt admin", `[{"token":"t","tenant":"acme","principal":"p","admn":true}]`, "unknown field"},
		{"misspelt groups", `[{"token":"t","tenant":"acme","principal":"p","group":["sre"]}]`, "unknown field"},
		{"trailing", `[{"token":"t","tenant":"acme","principal":"p"}] []`, "trailing"},
		{"null", `null`, "array"},
		{"object", `{"token":"t"}`, "cannot unmarshal"},
		{"wrong type", `[{"token":"t","tenant":"acme","principal":"p","admin":"yes"}]`, "cannot unmarshal"},
		{"empty", ``, "EOF"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := auth.Parse([]byte(c.data))
			if c.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, c.err)
		})
	}
}

func TestLoadFileNamesTheFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tokens.json")
	require.NoError(t, os.WriteFile(p, []byte(`[{"token":"t","tenant":"acme","principal":"p","writr":true}]`), 0o600))
	_, err := auth.LoadFile(p)
	require.ErrorContains(t, err, p)
	require.ErrorContains(t, err, "writr")
}

func TestNewRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		tok  []auth.Token
	}{
		{"empty token", []auth.Token{{Tenant: "acme", Principal: "p"}}},
		{"bad tenant", []auth.Token{{Token: "t", Tenant: "Acme", Principal: "p"}}},
		{"blank principal", []auth.Token{{Token: "t", Tenant: "acme", Principal: " "}}},
		{"empty group", []auth.Token{{Token: "t", Tenant: "acme", Principal: "p", Groups: []string{""}}}},
		{"duplicate", []auth.Token{{Token: "t", Tenant: "acme", Principal: "p"}, {Token: "t", Tenant: "acme", Principal: "q"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := auth.New(c.tok, nil)
			require.Error(t, err)
		})
	}
}

func TestAuthenticate(t *testing.T) {
	a, err := auth.New([]auth.Token{{Token: "secret", Tenant: "acme", Principal: "p", Groups: []string{"sre"}, Writer: true}}, nil)
	require.NoError(t, err)
	dev := auth.DevCaller
	anon, err := auth.New(nil, &dev)
	require.NoError(t, err)
	for _, c := range []struct {
		name, header string
		a            *auth.Authenticator
		want         *provenance.Caller
	}{
		{"token", "Bearer secret", a, &provenance.Caller{Tenant: "acme", Principal: "p", Groups: []string{"sre"}, Writer: true}},
		{"missing", "", a, nil},
		{"unknown", "Bearer nope", a, nil},
		{"not bearer", "Basic secret", a, nil},
		{"empty bearer", "Bearer ", a, nil},
		{"dev mode", "", anon, &provenance.Caller{Tenant: "default", Principal: "anonymous", Admin: true}},
		{"dev mode with a token", "Bearer secret", anon, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			if c.header != "" {
				r.Header.Set("Authorization", c.header)
			}
			got, err := c.a.Authenticate(r)
			if c.want == nil {
				require.ErrorIs(t, err, auth.ErrUnauthenticated)
				return
			}
			require.NoError(t, err)
			require.Equal(t, *c.want, got)
			back, ok := auth.CallerFrom(auth.WithCaller(r.Context(), got))
			require.True(t, ok)
			require.Equal(t, got, back)
		})
	}
}
