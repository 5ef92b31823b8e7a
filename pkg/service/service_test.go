package service

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/kgstream/kgstream/pkg/openapi"
	"github.com/kgstream/kgstream/pkg/serve"
)

// TestRunFirstReturnStopsTheRest: the first actor to fail stops the others
// and its error, named by the actor, is Run's; a cancelled context is a
// clean stop.
func TestRunFirstReturnStopsTheRest(t *testing.T) {
	boom := errors.New("boom")
	stopped := make(chan struct{})
	err := Run(t.Context(), []Actor{
		{Name: "waits", Run: func(ctx context.Context) error { <-ctx.Done(); close(stopped); return ctx.Err() }},
		{Name: "fails", Run: func(context.Context) error { return boom }},
	})
	if !errors.Is(err, boom) || err.Error() != "fails: boom" {
		t.Fatalf("Run = %v, want fails: boom", err)
	}
	select {
	case <-stopped:
	default:
		t.Fatal("the waiting actor was not stopped")
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := Run(ctx, []Actor{{Name: "waits", Run: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }}}); err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}
}

type fake struct{ routes *serve.Routes }

func (f fake) Actors() []Actor       { return nil }
func (f fake) Routes() *serve.Routes { return f.routes }

// TestAPIMountsEachService: the API is the OpenAPI document and every
// service's routes answered by that service; a service without routes adds
// none; a pattern two services list panics.
func TestAPIMountsEachService(t *testing.T) {
	answer := func(body string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(body)) })
	}
	a, b := serve.NewRoutes(), serve.NewRoutes()
	a.Handle("GET /a", answer("a"))
	b.Handle("/", answer("b"))
	api := API(fake{a}, fake{}, fake{b})
	want := []string{"/", "GET /a", "GET " + openapi.Path}
	if got := api.Patterns(); len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("patterns = %v, want %v", got, want)
	}
	for path, body := range map[string]string{"/a": "a", "/b": "b"} {
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Body.String() != body {
			t.Errorf("GET %s = %q, want %q", path, rec.Body.String(), body)
		}
	}
	if HasAPI(fake{}) || !HasAPI(fake{}, fake{a}) {
		t.Fatal("HasAPI")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a pattern listed by two services did not panic")
		}
	}()
	API(fake{a}, fake{a})
}
