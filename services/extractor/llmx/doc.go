// Package llmx is the extractor that asks an OpenAI-compatible model
// (pkg/llm): one request per text unit plus GraphRAG's gleaning passes, a
// fixed structured-output schema checked on every reply, an extraction
// cache keyed by content hash, prompt version, entity types and model
// (Cache: LRUCache in process, the redis subpackage shared), and token and
// cost accounting. Each relationship's supporting sentence is found after
// extraction by offline.CiteUnit.
package llmx
