package serve

import (
	"net/http"
	"slices"
)

// Route is one pattern of an HTTP API and its handler.
type Route struct {
	Pattern string
	Handler http.Handler
}

// Routes is an HTTP API given as its patterns, so that a process serves it
// alone or mounts it beside other services' APIs on one mux, each pattern
// registered once, by the service that answers it.
type Routes struct {
	mux  *http.ServeMux
	list []Route
}

// NewRoutes returns an empty API.
func NewRoutes() *Routes { return &Routes{mux: http.NewServeMux()} }

// Handle registers h for pattern. As with http.ServeMux, a pattern that
// conflicts with one registered already panics.
func (r *Routes) Handle(pattern string, h http.Handler) {
	r.mux.Handle(pattern, h)
	r.list = append(r.list, Route{Pattern: pattern, Handler: h})
}

// Mount registers every route of o on r, each with o's handler.
func (r *Routes) Mount(o *Routes) {
	for _, rt := range o.list {
		r.Handle(rt.Pattern, rt.Handler)
	}
}

// Patterns lists the registered patterns, sorted.
func (r *Routes) Patterns() []string {
	out := make([]string, 0, len(r.list))
	for _, rt := range r.list {
		out = append(out, rt.Pattern)
	}
	slices.Sort(out)
	return out
}

// ServeHTTP routes a request to the handler of its pattern.
func (r *Routes) ServeHTTP(w http.ResponseWriter, req *http.Request) { r.mux.ServeHTTP(w, req) }
