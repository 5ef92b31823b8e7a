// Package offline is the extractor that needs no model: a pipeline of
// stages over one analysis of a document (its sentences, the gazetteer
// entities it mentions and the component-shaped names it uses) whose
// outputs merge: MentionStage (document -mentions-> entity), Patterns
// (YAML sentence patterns; by default incident -affected-> service,
// incident -involved-> component, depends_on, owned_by), CoOccurrenceStage,
// FailureStage (incident -failure-> failure_mode from pkg/taxonomy) and,
// optionally, NounPhraseStage (co_occurs between noun phrases found with a
// part-of-speech tagger).
//
// The bundled gazetteer (gazetteer.yaml), the default relation patterns
// (patterns.yaml) and the ordinary-word list (words.txt) are embedded.
// Every relationship a stage emits cites its text unit, the byte span in
// the document of the sentence that supports it (Unit.Cite) and the unit's
// content hash; CiteUnit finds that sentence for an extractor that names
// only a relationship's endpoints.
package offline
