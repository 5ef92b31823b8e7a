// Package reporter is kgstream's reporter worker.
package reporter
