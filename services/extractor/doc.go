// Package extractor is kgstream's extractor stage: it consumes
// kg.doc.changed events, cuts each document version into token-window text
// units, extracts typed entities and relationships from them and publishes
// kg.extracted events. Structured documents (catalog imports) pass through
// unchanged.
//
// Two extractors exist. LLM asks an OpenAI-compatible model (gleaning,
// schema checks, an extraction cache keyed by content hash, prompt version,
// entity types and model, token and cost accounting). Offline needs no
// model: it is a pipeline of stages over one analysis of the document
// (sentences, gazetteer mentions, component-shaped names) whose outputs
// merge: MentionStage (document -mentions-> entity), Patterns (YAML
// sentence patterns; by default incident -affected-> service,
// incident -involved-> component, depends_on, owned_by), FailureStage
// (incident -failure-> failure_mode from pkg/taxonomy) and, optionally,
// NounPhraseStage (co_occurs between noun phrases found with a
// part-of-speech tagger).
//
// Every relationship either extractor emits carries its provenance: the
// text unit, the byte span in the document of the sentence that supports
// it (Unit.Cite for the offline stages; for the LLM, the sentence found by
// the rule in support.go) and the unit's content hash, which the chunker
// sets on each TextUnit.
package extractor
