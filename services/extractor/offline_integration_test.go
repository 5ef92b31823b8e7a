//go:build integration

package extractor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/services/extractor/offline"
)

func TestOfflineExtractsSeedPostmortem(t *testing.T) {
	bus := startBus(t)
	x, err := offline.New(offline.Config{Gazetteer: seedGazetteer(t)})
	require.NoError(t, err)
	startWorker(t, bus, x, nil, nil)

	publishDoc(t, bus, seedDoc(t, "acme", "INC-112", 1))
	publishDoc(t, bus, seedDoc(t, "acme", "INC-101", 1))
	got := waitExtracted(t, bus, "acme", 2)

	require.Equal(t, []string{
		"component:certmanager -co_occurs-> service:searchapi",
		"failure_mode:expired certificate -is_a-> failure_mode:certificate expiry",
		"incident:INC-112 -affected-> service:searchapi",
		"incident:INC-112 -failure-> failure_mode:expired certificate",
		"incident:INC-112 -involved-> component:certmanager",
		"incident:INC-112 -mentions-> component:certmanager",
		"incident:INC-112 -mentions-> service:searchapi",
	}, triples(got[0].Relationships))
	require.Equal(t, []string{
		"failure_mode:expired certificate -is_a-> failure_mode:certificate expiry",
		"incident:INC-101 -affected-> service:authservice",
		"incident:INC-101 -affected-> service:checkoutapi",
		"incident:INC-101 -failure-> failure_mode:expired certificate",
		"incident:INC-101 -involved-> component:certmanager",
		"incident:INC-101 -involved-> component:ingress",
		"incident:INC-101 -mentions-> component:certmanager",
		"incident:INC-101 -mentions-> component:ingress",
		"incident:INC-101 -mentions-> service:authservice",
		"incident:INC-101 -mentions-> service:checkoutapi",
		"service:authservice -co_occurs-> service:checkoutapi",
	}, triples(got[1].Relationships))

	ex := got[0]
	unit := ex.TextUnits[0].ID
	require.Equal(t, events.RawEntity{Name: "INC-112", Type: "incident", Description: "Postmortem INC-112", TextUnit: unit}, ex.Entities[0])
	require.Contains(t, ex.Entities, events.RawEntity{Name: "Cert Manager", Type: "component", Key: "certmanager", TextUnit: unit})
	for _, r := range ex.Relationships {
		require.Equal(t, unit, r.TextUnit)
	}
}
