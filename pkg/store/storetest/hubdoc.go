package storetest

import (
	"fmt"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/store"
)

// HubDoc is document i's contribution at version: its incident, naming a
// hub and a second hub (their edge gathers a support per document), in a
// name of the hub that changes with the version. The adapters' layout
// conversion tests build their graphs of it.
func HubDoc(i int, version int64) store.Contributions {
	inc := fmt.Sprintf("incident:%03d", i)
	u := []string{"u"}
	return store.Contributions{
		TextUnits: []events.TextUnit{{ID: "u", Text: "t"}},
		Entities: []store.EntityContribution{
			{ID: inc, Type: "incident", Name: inc, NameRank: 2, TextUnits: u},
			{ID: "service:hub", Type: "service", Name: fmt.Sprintf("Hub v%d", version), NameRank: 2 + i%3, TextUnits: u,
				Description: fmt.Sprintf("seen by %d at %d", i, version)},
			{ID: "service:hub2", Type: "service", Name: "Hub two", NameRank: 2, TextUnits: u},
		},
		Edges: []store.EdgeContribution{
			{Source: inc, Relation: "affected", Target: "service:hub", Weight: 1, TextUnits: u},
			{Source: "service:hub", Relation: "calls", Target: "service:hub2", Weight: float64(version), TextUnits: u},
		},
	}
}
