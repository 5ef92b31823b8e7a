// Package extractor is kgstream's extractor stage: it consumes
// kg.doc.changed events, cuts each document version into token-window text
// units (chunk), extracts typed entities and relationships from them with
// an Extractor and publishes kg.extracted events (Worker). Structured
// documents (catalog imports) pass through unchanged. Reextractor keeps
// extraction a function of the catalog: after a catalog change it
// re-extracts the stored documents the change can affect.
//
// The extractors live in subpackages: offline needs no model (a pipeline
// of stages over one analysis of the document: gazetteer mentions, sentence
// patterns, failure modes, co-occurrence, noun phrases); llmx asks an
// OpenAI-compatible model, with an extraction cache (redis is its shared
// adapter). eval scores extraction against labelled sets.
//
// Every relationship either extractor emits carries its provenance: the
// text unit, the byte span in the document of the sentence that supports
// it and the unit's content hash, which the chunker sets on each TextUnit.
package extractor
