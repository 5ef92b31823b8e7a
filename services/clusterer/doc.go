// Package clusterer is kgstream's clusterer worker.
package clusterer
