// Package query is kgstream's query service: the HTTP read API of API.md
// (paths, aggregate, entities, communities, reports and POST /v1/query).
//
// Every read applies the admission rule of package provenance before any
// fact enters a response: one provenance.Admitter per request, checked
// against the source registry at read time, so a revocation, deletion or
// edit recorded by the gateway is in force for the very next request. Only
// the caller's tenant is ever read. If the registry cannot be asked, the
// request fails closed with 503.
package query
