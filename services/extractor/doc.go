// Package extractor is kgstream's extractor stage: it consumes
// kg.doc.changed events, cuts each document version into token-window text
// units, extracts typed entities and relationships from them (with an
// OpenAI-compatible LLM, or offline with a gazetteer of known entities) and
// publishes kg.extracted events. Structured documents (catalog imports)
// pass through unchanged.
package extractor
