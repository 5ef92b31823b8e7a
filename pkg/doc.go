// Package pkg holds kgstream's shared library: event types and subjects,
// provenance and admission, the store contracts and their adapters, and the
// JetStream plumbing every worker uses.
package pkg
