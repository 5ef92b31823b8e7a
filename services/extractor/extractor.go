package extractor

import (
	"context"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/services/extractor/llmx"
	"github.com/kgstream/kgstream/services/extractor/offline"
)

// Extractor finds entities and relationships in the text units of one
// document version. Every returned entity and relationship names the text
// unit that supports it. An error marked with stream.Permanent is
// dead-lettered at once; any other error is retried with backoff.
type Extractor interface {
	Extract(ctx context.Context, doc *events.DocChanged, units []events.TextUnit) ([]events.RawEntity, []events.RawRelationship, error)
	// Name identifies the extractor in events and metrics.
	Name() string
}

// The extractors of the subpackages.
var (
	_ Extractor = (*offline.Extractor)(nil)
	_ Extractor = (*llmx.Extractor)(nil)
)

// connected splits rels into those whose endpoints are among ents and the
// number dropped: a relationship to an entity nobody declared would become
// an orphan edge downstream.
func connected(ents []events.RawEntity, rels []events.RawRelationship) ([]events.RawRelationship, int) {
	ids := make(map[string]bool, len(ents))
	for _, e := range ents {
		ids[offline.EntityID(e)] = true
	}
	kept := make([]events.RawRelationship, 0, len(rels))
	for _, r := range rels {
		if ids[resolve.ID(r.SourceType, r.Source)] && ids[resolve.ID(r.TargetType, r.Target)] {
			kept = append(kept, r)
		}
	}
	return kept, len(rels) - len(kept)
}
