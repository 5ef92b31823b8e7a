package query_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/stream"
	"github.com/kgstream/kgstream/services/query"
)

// The query routes' mechanics (errors, parameter validation, metrics,
// config) on the unit fixture, testdata/graph.yaml.

// certPaths follows cert-manager's incidents to the teams owning what
// they affected.
const certPaths = "/v1/paths?start=component:cert-manager&rels=~involved,affected,owned_by"

func TestErrors(t *testing.T) {
	f := newUnitFixture(t)
	// An entity key under two types makes a bare name ambiguous.
	units := sentences("ingress the service and ingress the component.")
	announceApply(t, f.st, tenantAcme, "DOC-AMB", 1, provenance.PublicACL(), store.Contributions{
		TextUnits: units,
		Entities:  []store.EntityContribution{{ID: "service:ingress", Type: "service", Name: "ingress", NameRank: 2, TextUnits: []string{"u0"}}},
	})

	cases := []struct {
		name, method, path, token string
		body                      any
		status                    int
		code                      string
	}{
		{"no token", "GET", certPaths, "", nil, 401, "unauthenticated"},
		{"bad token", "GET", certPaths, "nope", nil, 401, "unauthenticated"},
		{"bad token on query", "POST", "/v1/query", "nope", map[string]any{"mode": "local", "question": "x"}, 401, "unauthenticated"},
		{"missing start", "GET", "/v1/paths?rels=affected", tokAlice, nil, 400, "missing_param"},
		{"missing rels", "GET", "/v1/paths?start=component:ingress", tokAlice, nil, 400, "missing_param"},
		{"empty rel", "GET", "/v1/paths?start=component:ingress&rels=affected,,owned_by", tokAlice, nil, 400, "invalid_param"},
		{"bad rel", "GET", "/v1/paths?start=component:ingress&rels=Owned%20By", tokAlice, nil, 400, "invalid_param"},
		{"too many hops", "GET", "/v1/paths?start=component:ingress&rels=a,b,c,d,e", tokAlice, nil, 400, "too_many_hops"},
		{"repeated rels", "GET", "/v1/paths?start=component:ingress&rels=a&rels=b", tokAlice, nil, 400, "invalid_param"},
		{"bad ref", "GET", "/v1/paths?start=:ingress&rels=a", tokAlice, nil, 400, "invalid_param"},
		{"unknown entity", "GET", "/v1/paths?start=component:nosuch&rels=affected", tokAlice, nil, 404, "unknown_entity"},
		{"unknown bare entity", "GET", "/v1/paths?start=nosuch&rels=affected", tokAlice, nil, 404, "unknown_entity"},
		{"ambiguous", "GET", "/v1/paths?start=ingress&rels=~involved", tokAlice, nil, 409, "ambiguous_entity"},
		{"paths negative limit", "GET", "/v1/paths?start=component:ingress&rels=~involved&limit=-1", tokAlice, nil, 400, "invalid_param"},
		{"paths non-integer limit", "GET", "/v1/paths?start=component:ingress&rels=~involved&limit=some", tokAlice, nil, 400, "invalid_param"},
		{"paths repeated limit", "GET", "/v1/paths?start=component:ingress&rels=~involved&limit=1&limit=1", tokAlice, nil, 400, "invalid_param"},
		{"paths negative offset", "GET", "/v1/paths?start=component:ingress&rels=~involved&offset=-1", tokAlice, nil, 400, "invalid_param"},
		{"paths huge offset", "GET", "/v1/paths?start=component:ingress&rels=~involved&offset=99999999999", tokAlice, nil, 400, "invalid_param"},
		{"paths page of an unknown start", "GET", "/v1/paths?start=component:nosuch&rels=affected&limit=1", tokAlice, nil, 404, "unknown_entity"},
		{"aggregate no type", "GET", "/v1/aggregate?rel=failure", tokAlice, nil, 400, "missing_param"},
		{"aggregate no rel", "GET", "/v1/aggregate?type=incident", tokAlice, nil, 400, "missing_param"},
		{"aggregate two rels", "GET", "/v1/aggregate?type=incident&rel=a,b", tokAlice, nil, 400, "invalid_param"},
		{"aggregate bad type", "GET", "/v1/aggregate?type=In%20cident&rel=failure", tokAlice, nil, 400, "invalid_param"},
		{"aggregate negative limit", "GET", "/v1/aggregate?type=incident&rel=failure&limit=-1", tokAlice, nil, 400, "invalid_param"},
		{"aggregate non-integer limit", "GET", "/v1/aggregate?type=incident&rel=failure&limit=ten", tokAlice, nil, 400, "invalid_param"},
		{"aggregate fractional limit", "GET", "/v1/aggregate?type=incident&rel=failure&limit=1.5", tokAlice, nil, 400, "invalid_param"},
		{"aggregate huge limit", "GET", "/v1/aggregate?type=incident&rel=failure&limit=2147483648", tokAlice, nil, 400, "invalid_param"},
		{"aggregate repeated limit", "GET", "/v1/aggregate?type=incident&rel=failure&limit=1&limit=2", tokAlice, nil, 400, "invalid_param"},
		{"aggregate negative offset", "GET", "/v1/aggregate?type=incident&rel=failure&offset=-3", tokAlice, nil, 400, "invalid_param"},
		{"aggregate bad offset", "GET", "/v1/aggregate?type=incident&rel=failure&limit=2&offset=0x10", tokAlice, nil, 400, "invalid_param"},
		{"aggregate negative members", "GET", "/v1/aggregate?type=incident&rel=failure&members=-1", tokAlice, nil, 400, "invalid_param"},
		{"aggregate bad members", "GET", "/v1/aggregate?type=incident&rel=failure&members=all", tokAlice, nil, 400, "invalid_param"},
		{"aggregate repeated members", "GET", "/v1/aggregate?type=incident&rel=failure&members=1&members=1", tokAlice, nil, 400, "invalid_param"},
		{"aggregate bad member_offset", "GET", "/v1/aggregate?type=incident&rel=failure&members=2&member_offset=-2", tokAlice, nil, 400, "invalid_param"},
		{"aggregate paging without rel", "GET", "/v1/aggregate?type=incident&limit=2", tokAlice, nil, 400, "missing_param"},
		{"entities bad limit", "GET", "/v1/entities?limit=1001", tokAlice, nil, 400, "invalid_param"},
		{"entities negative offset", "GET", "/v1/entities?offset=-1", tokAlice, nil, 400, "invalid_param"},
		{"entity unknown", "GET", "/v1/entities/team/nosuch", tokAlice, nil, 404, "unknown_entity"},
		{"entity bad type", "GET", "/v1/entities/Te%20am/x", tokAlice, nil, 400, "invalid_param"},
		{"report absent", "GET", "/v1/reports/nope", tokAlice, nil, 404, "not_found"},
		{"report odd id", "GET", "/v1/reports/%20%01x", tokAlice, nil, 404, "not_found"},
		{"query unknown mode", "POST", "/v1/query", tokAlice, map[string]any{"mode": "psychic", "question": "x"}, 400, "invalid_mode"},
		{"query no mode", "POST", "/v1/query", tokAlice, map[string]any{"question": "x"}, 400, "missing_field"},
		{"query no question", "POST", "/v1/query", tokAlice, map[string]any{"mode": "local"}, 400, "missing_field"},
		{"query unknown field", "POST", "/v1/query", tokAlice, map[string]any{"mode": "local", "question": "x", "k": 1}, 400, "malformed_json"},
		{"query bad budget", "POST", "/v1/query", tokAlice, map[string]any{"mode": "local", "question": "x", "budget_tokens": 0}, 400, "invalid_field"},
		{"query malformed", "POST", "/v1/query", tokAlice, "{", 400, "malformed_json"},
		{"query too large", "POST", "/v1/query", tokAlice, `{"mode":"local","question":"` + strings.Repeat("a", 70<<10) + `"}`, 413, "body_too_large"},
		{"query basic", "POST", "/v1/query", tokAlice, map[string]any{"mode": "basic", "question": "x"}, 501, "not_implemented"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, code := f.errorCode(tc.method, tc.path, tc.token, tc.body)
			require.Equal(t, tc.status, status)
			require.Equal(t, tc.code, code)
		})
	}

	t.Run("ambiguous lists candidates", func(t *testing.T) {
		var e struct {
			Error struct {
				Details struct {
					Candidates []entity `json:"candidates"`
				} `json:"details"`
			} `json:"error"`
		}
		require.Equal(t, http.StatusConflict, f.do(http.MethodGet, "/v1/paths?start=ingress&rels=~involved", tokAlice, nil, &e))
		require.Equal(t, []entity{
			{ID: "component:ingress", Type: "component", Name: "ingress"},
			{ID: "service:ingress", Type: "service", Name: "ingress"},
		}, e.Error.Details.Candidates)
	})

	t.Run("wrong type names the types that know the name", func(t *testing.T) {
		var e struct {
			Error struct {
				Code    string `json:"code"`
				Details struct {
					Candidates []entity `json:"candidates"`
				} `json:"details"`
			} `json:"error"`
		}
		require.Equal(t, http.StatusNotFound, f.do(http.MethodGet, "/v1/paths?start=service:cert-manager&rels=~involved", tokAlice, nil, &e))
		require.Equal(t, "unknown_entity", e.Error.Code)
		require.Len(t, e.Error.Details.Candidates, 1)
		require.Equal(t, "component:certmanager", e.Error.Details.Candidates[0].ID)
	})

	t.Run("registry down fails closed", func(t *testing.T) {
		f.st.fail.Store(true)
		defer f.st.fail.Store(false)
		for _, path := range []string{certPaths, "/v1/aggregate?type=incident&rel=failure", "/v1/entities", "/v1/entities/team/payments", "/v1/communities", "/v1/reports/r-c-0-cert"} {
			status, code := f.errorCode(http.MethodGet, path, tokBob, nil)
			require.Equal(t, http.StatusServiceUnavailable, status, path)
			require.Equal(t, "admission_unavailable", code, path)
		}
		status, code := f.errorCode(http.MethodPost, "/v1/query", tokBob, map[string]any{"mode": "local", "question": "cert-manager"})
		require.Equal(t, http.StatusServiceUnavailable, status)
		require.Equal(t, "admission_unavailable", code)
	})
}

func TestMetrics(t *testing.T) {
	f := newUnitFixture(t)
	f.get(certPaths, tokAlice, http.StatusOK, nil)
	f.get(certPaths, "nope", http.StatusUnauthorized, nil)
	n, err := testutil.GatherAndCount(f.reg, "kgstream_query_requests_total", "kgstream_query_duration_seconds")
	require.NoError(t, err)
	require.Equal(t, 3, n) // two request series, one duration series
	require.NoError(t, testutil.GatherAndCompare(f.reg, strings.NewReader(`
# HELP kgstream_query_requests_total Query API requests by route and HTTP status code.
# TYPE kgstream_query_requests_total counter
kgstream_query_requests_total{code="200",route="GET /v1/paths"} 1
kgstream_query_requests_total{code="401",route="GET /v1/paths"} 1
`), "kgstream_query_requests_total"))
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, query.DefaultConfig().Validate())
	bad := query.DefaultConfig()
	bad.MaxHops = query.HardMaxHops + 1
	bad.ExcludedPathEntities = []string{"nocolon"}
	bad.GiveWay = &stream.GiveWay{}
	err := bad.Validate()
	require.ErrorContains(t, err, "MaxHops")
	require.ErrorContains(t, err, "ExcludedPathEntities")
	require.ErrorContains(t, err, "GiveWay")
	a, err := newAuth()
	require.NoError(t, err)
	_, err = query.New(bad, openStore(t), a, nil, nil)
	require.Error(t, err)
	_, err = query.New(query.Config{}, nil, a, nil, nil)
	require.Error(t, err)
}

func TestRun(t *testing.T) {
	a, err := newAuth()
	require.NoError(t, err)
	svc, err := query.New(query.Config{}, openStore(t), a, nil, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.NoError(t, svc.Run(ctx))
}
