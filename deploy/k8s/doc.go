// Package k8s holds the tests of kgstream's Kubernetes manifests: the
// kustomize base and overlays beside this file are rendered with kubectl
// and every object is decoded strictly with the Kubernetes API types.
package k8s
