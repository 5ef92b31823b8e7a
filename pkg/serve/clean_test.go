package serve

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCleanPathsRefusesDotSegments(t *testing.T) {
	api := http.NewServeMux()
	var got []string
	api.HandleFunc("/v1/documents/", func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.URL.EscapedPath())
		w.WriteHeader(http.StatusAccepted)
	})
	srv := httptest.NewServer(CleanPaths(Mux(api, nil, nil)))
	t.Cleanup(srv.Close)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, p := range []string{"/v1/documents/a/../b", "/v1/documents/./b", "/v1/documents//acl", "/v1/documents/a/..", "/v1/./documents/b"} {
		req, err := http.NewRequest(http.MethodDelete, srv.URL+p, nil)
		require.NoError(t, err)
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		var out map[string]map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out), p)
		resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, p)
		require.Equal(t, "invalid_path", out["error"]["code"], p)
	}
	require.Empty(t, got, "an unclean path reached the API")
	for _, p := range []string{"/v1/documents/%2F", "/v1/documents/a%2F..%2Fb", "/v1/documents/%2E%2E/acl", "/v1/documents/"} {
		req, err := http.NewRequest(http.MethodDelete, srv.URL+p, nil)
		require.NoError(t, err)
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusAccepted, resp.StatusCode, p)
	}
	require.Equal(t, []string{"/v1/documents/%2F", "/v1/documents/a%2F..%2Fb", "/v1/documents/%2E%2E/acl", "/v1/documents/"}, got)
}
