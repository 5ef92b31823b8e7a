package resolve_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/resolve"
)

func TestKeyFoldsSpellingsAndInflections(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{"cert-manager", "Cert Manager"},
		{"certmanager", "CERT_MANAGER"},
		{"Kafka broker", "Kafka brokers"},
		{"kafka-brokers", "Kafka Broker"},
		{"DNS server", "DNS servers"},
		{"Helm chart", "Helm charts"},
		{"Azure Function", "Azure Functions"},
		{"network policy", "network policies"},
		{"network switch", "network switches"},
		{"Redis cache", "Redis caches"},
		{"load balancer", "load-balancers"},
		{"Kafka Stream", "Kafka Streams"},
	} {
		require.Equal(t, resolve.Key(tc.a), resolve.Key(tc.b), "%q and %q", tc.a, tc.b)
	}
	for _, tc := range []struct{ a, b string }{
		{"broker", "brokers"},       // one word: a name, not an inflection
		{"Amazon EBS", "Amazon EB"}, // an acronym stays
		{"AWS IOPS", "AWS IOP"},
	} {
		require.NotEqual(t, resolve.Key(tc.a), resolve.Key(tc.b), "%q and %q", tc.a, tc.b)
	}
	for name, want := range map[string]string{
		"Kubernetes":          "kubernetes",
		"Google Kubernetes":   "googlekubernetes",
		"HTTP status":         "httpstatus",
		"Azure DevOps":        "azuredevops",
		"MongoDB Atlas":       "mongodbatlas",
		"Log Analytics":       "loganalytics",
		"kube-state-metrics":  "kubestatemetrics",
		"Cloud Pub/Sub":       "cloudpubsub",
		"Amazon Web Services": "amazonwebservice",
		"cr2-esams":           "cr2esams",
		"...":                 "...",
	} {
		require.Equal(t, want, resolve.Key(name), name)
	}
}
