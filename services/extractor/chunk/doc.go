// Package chunk cuts documents into text units: GraphRAG's token windows
// over cl100k_base (Chunker), their ids and content hashes, and the
// sentence spans the extractors read inside a unit (Sentences).
package chunk
