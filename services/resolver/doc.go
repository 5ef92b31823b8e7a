// Package resolver is kgstream's resolver worker.
package resolver
