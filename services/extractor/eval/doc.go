// Package eval scores extraction: relationships against gold triples
// (ScoreTriples) and the offline extractor over whole public corpora
// against hand-labelled causes and systems (Corpora, CorporaCommand, the
// command behind `kgstream eval extraction --labels`).
package eval
