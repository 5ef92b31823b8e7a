package serve

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestUnknownRoutesAnswerJSON(t *testing.T) {
	api := http.NewServeMux()
	api.HandleFunc("GET /v1/thing", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })
	ready := &Readiness{}
	srv := httptest.NewServer(Mux(api, prometheus.NewRegistry(), ready))
	defer srv.Close()
	for _, c := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/nope", 404, "not_found"},
		{"POST", "/v1/thing", 405, "method_not_allowed"},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != c.status || body.Error.Code != c.code {
			t.Fatalf("%s %s: %d %+v %v", c.method, c.path, resp.StatusCode, body, err)
		}
	}
	resp, err := http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Fatalf("readyz before ready = %d", resp.StatusCode)
	}
	ready.Set(true)
	resp, _ = http.Get(srv.URL + "/readyz")
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("readyz when ready = %d", resp.StatusCode)
	}
	resp, _ = http.Get(srv.URL + "/v1/thing")
	resp.Body.Close()
	if resp.StatusCode != 204 {
		t.Fatalf("routed request = %d", resp.StatusCode)
	}
}
