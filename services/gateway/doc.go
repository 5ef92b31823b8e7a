// Package gateway is kgstream's gateway worker.
package gateway
