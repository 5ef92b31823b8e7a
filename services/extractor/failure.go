package extractor

import (
	"context"
	"fmt"
	"slices"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/taxonomy"
)

// RelFailure is the relation from an incident to its failure mode.
const RelFailure = "failure"

// TypeFailureMode is the entity type of failure modes.
const TypeFailureMode = "failure_mode"

// FailureStage classifies an incident document with a failure-mode
// taxonomy: incident -failure-> failure_mode for its primary mode (and any
// mode the text asserts as a cause outright, see taxonomy.Select), each
// supported by the text unit and sentence of the cue.
type FailureStage struct {
	Taxonomy *taxonomy.Taxonomy
	// DocTypes are the document types classified (resolve.Type spelling).
	DocTypes []string
}

var _ Stage = (*FailureStage)(nil)

// Name implements Stage.
func (s *FailureStage) Name() string { return "taxonomy" }

// Extract implements Stage.
func (s *FailureStage) Extract(_ context.Context, a *Analysis, out *Output) error {
	if s.Taxonomy == nil || !slices.Contains(s.DocTypes, a.DocType()) {
		return nil
	}
	// Units overlap, so a cue in the overlap is found twice; Select keeps
	// one hit per mode, and unit order keeps the earliest.
	type located struct {
		taxonomy.Hit
		unit int
	}
	var all []taxonomy.Hit
	var where []located
	for i, u := range a.Units {
		for _, h := range s.Taxonomy.Find(u.Text, u.Sentences) {
			// Offsets become document offsets so hits of different units
			// order correctly.
			dh := h
			dh.Start += u.Start
			dh.End += u.Start
			all = append(all, dh)
			where = append(where, located{h, i})
		}
	}
	de := a.DocEntity
	for _, sel := range taxonomy.Select(all) {
		i := slices.IndexFunc(all, func(h taxonomy.Hit) bool { return h.Start == sel.Start && h.Mode == sel.Mode && h.Cue == sel.Cue })
		u := a.Units[where[i].unit]
		h := where[i].Hit
		out.Entity(events.RawEntity{Name: h.Mode, Type: TypeFailureMode, TextUnit: u.ID,
			Description: fmt.Sprintf("failure mode %q", h.Mode)})
		out.Relationship(u.Cite(events.RawRelationship{Source: de.Name, SourceType: de.Type, Relation: RelFailure,
			Target: h.Mode, TargetType: TypeFailureMode, Description: evidence(u.Text, h.Sentence),
			Strength: h.Weight}, h.Sentence))
	}
	return nil
}
