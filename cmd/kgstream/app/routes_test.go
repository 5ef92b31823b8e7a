package app_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/openapi"
	"github.com/kgstream/kgstream/pkg/service"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	"github.com/kgstream/kgstream/pkg/stream/streamtest"
	"github.com/kgstream/kgstream/services/clusterer"
	"github.com/kgstream/kgstream/services/extractor"
	"github.com/kgstream/kgstream/services/gateway"
	"github.com/kgstream/kgstream/services/query"
	"github.com/kgstream/kgstream/services/reporter"
	"github.com/kgstream/kgstream/services/resolver"
)

// TestAPIRoutesAreTheServicesRoutes: the all-in-one's API is exactly the
// routes the gateway's and the query service's NewService list (what
// their own binaries serve) plus the OpenAPI document, each once. A route
// the all-in-one lists itself, or one a service adds that it misses, fails
// here. Its run group runs exactly the services' actors besides its own.
func TestAPIRoutesAreTheServicesRoutes(t *testing.T) {
	a := startApp(t, app.Config{})

	st, err := embedded.Open(filepath.Join(t.TempDir(), "kg.db"), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	dev := auth.DevCaller
	authn, err := auth.New(nil, &dev)
	require.NoError(t, err)
	d := service.Deps{Bus: streamtest.NewBus(t, streamtest.Options{}), Stores: st, Auth: authn}
	gw, err := gateway.NewService(gateway.ServiceConfig{}, d)
	require.NoError(t, err)
	qs, err := query.NewService(query.ServiceConfig{}, d)
	require.NoError(t, err)

	want := []string{"GET " + openapi.Path}
	want = append(want, gw.Routes().Patterns()...)
	want = append(want, qs.Routes().Patterns()...)
	slices.Sort(want)
	require.Greater(t, len(want), 8, "the services list too few routes: %v", want)
	require.Equal(t, want, a.Routes().Patterns())

	// The run group runs the actors of the services the constructors
	// build (the query service sharing the resolver's alias table, as in
	// the all-in-one), besides the servers, the audit and the recorder.
	ex, err := extractor.NewService(extractor.ServiceConfig{}, d)
	require.NoError(t, err)
	rs, err := resolver.NewService(resolver.ServiceConfig{}, d)
	require.NoError(t, err)
	cl, err := clusterer.NewService(clusterer.Config{}, d)
	require.NoError(t, err)
	rp, err := reporter.NewService(reporter.Config{}, d)
	require.NoError(t, err)
	qcfg := query.ServiceConfig{}
	qcfg.Aliases = rs.Aliases()
	shared, err := query.NewService(qcfg, d)
	require.NoError(t, err)
	actors := []string{"http", "ops", "audit", "status figures"}
	for _, s := range []service.Service{gw, ex, rs, cl, rp, shared} {
		for _, act := range s.Actors() {
			actors = append(actors, act.Name)
		}
	}
	slices.Sort(actors)
	got := a.Components()
	slices.Sort(got)
	require.Equal(t, actors, got)
}
