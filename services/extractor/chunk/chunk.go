package chunk

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"

	"github.com/kgstream/kgstream/pkg/events"
)

// GraphRAG's chunking defaults.
const (
	DefaultTokens  = 1200
	DefaultOverlap = 100
)

// cl100k_base's definition, as tiktoken-go builds it. It is restated here
// so the tokenizer is built from the embedded ranks without
// tiktoken.SetBpeLoader, which would swap a process-wide loader (and the
// default loader downloads the ranks at run time).
const (
	cl100kFile    = "cl100k_base.tiktoken"
	cl100kPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// cl100kSpecial returns cl100k_base's special tokens (a fresh map: the
// encoder keeps the one it is given).
func cl100kSpecial() map[string]int {
	return map[string]int{
		"<|endoftext|>":   100257,
		"<|fim_prefix|>":  100258,
		"<|fim_middle|>":  100259,
		"<|fim_suffix|>":  100260,
		"<|endofprompt|>": 100276,
	}
}

// Tokenizer counts and splits text in cl100k_base tokens, loaded from the
// ranks embedded in tiktoken-go-loader: no network at run time. Loading
// takes a moment and some memory, so share one per process. It is safe for
// concurrent use.
type Tokenizer struct {
	enc *tiktoken.Tiktoken
	// ranks are cl100k_base's mergeable ranks: token bytes -> rank.
	ranks *rankTable
	// merged remembers how recent pieces that are no token split.
	merged *mergeCache
}

// NewTokenizer loads cl100k_base.
func NewTokenizer() (*Tokenizer, error) {
	ranks, err := tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe(cl100kFile)
	if err != nil {
		return nil, fmt.Errorf("loading %s ranks: %w", cl100kFile, err)
	}
	specialTokens := cl100kSpecial()
	bpe, err := tiktoken.NewCoreBPE(ranks, specialTokens, cl100kPattern)
	if err != nil {
		return nil, fmt.Errorf("building cl100k_base: %w", err)
	}
	special := make(map[string]any, len(specialTokens))
	for k := range specialTokens {
		special[k] = true
	}
	enc := tiktoken.NewTiktoken(bpe, &tiktoken.Encoding{Name: "cl100k_base", PatStr: cl100kPattern,
		MergeableRanks: ranks, SpecialTokens: specialTokens}, special)
	return &Tokenizer{enc: enc, ranks: newRankTable(ranks), merged: newMergeCache()}, nil
}

// Count returns the number of tokens of text. Special-token spellings in
// the text count as ordinary text: documents are data, not prompts.
func (t *Tokenizer) Count(text string) int { return len(t.enc.EncodeOrdinary(text)) }

// Chunker splits documents into token windows, GraphRAG-style: windows of
// Size tokens, each starting Size-Overlap tokens after the previous one.
type Chunker struct {
	tok           *Tokenizer
	size, overlap int
}

// New returns a chunker over tok.
func New(tok *Tokenizer, size, overlap int) (*Chunker, error) {
	if tok == nil {
		return nil, errors.New("extractor: chunker needs a tokenizer")
	}
	if size < 1 || overlap < 0 || overlap >= size {
		return nil, fmt.Errorf("extractor: chunk size %d and overlap %d must satisfy 0 <= overlap < size", size, overlap)
	}
	return &Chunker{tok: tok, size: size, overlap: overlap}, nil
}

// TextUnitID is the id of chunk index of a document version: the first 16
// hex digits of sha256(doc id, version, index). It depends on nothing else,
// so re-extracting a version yields the same ids and replays converge.
func TextUnitID(docID string, version int64, index int) string {
	h := sha256.New()
	h.Write([]byte(docID))
	h.Write([]byte{0})
	h.Write([]byte(strconv.FormatInt(version, 10)))
	h.Write([]byte{0})
	h.Write([]byte(strconv.Itoa(index)))
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Chunk splits text into text units. Start and End are byte offsets into
// text with Text == text[Start:End]; a window boundary that falls inside a
// multi-byte character is widened to the whole character, so every unit is
// valid UTF-8 (GraphRAG would decode a replacement character there).
// Tokens is the window's token count and Hash the content hash of Text.
// Text without tokens has no units.
func (c *Chunker) Chunk(docID string, version int64, text string) []events.TextUnit {
	offsets := c.tok.offsets(text)
	if len(offsets) == 1 {
		return nil
	}
	ntok := len(offsets) - 1
	var units []events.TextUnit
	for start := 0; ; start += c.size - c.overlap {
		end := min(start+c.size, ntok)
		bs, be := min(offsets[start], len(text)), min(offsets[end], len(text))
		for bs > 0 && !utf8.RuneStart(text[bs]) {
			bs--
		}
		for be < len(text) && !utf8.RuneStart(text[be]) {
			be++
		}
		units = append(units, events.TextUnit{
			ID:     TextUnitID(docID, version, len(units)),
			Text:   text[bs:be],
			Start:  bs,
			End:    be,
			Tokens: end - start,
			Hash:   ContentHash(text[bs:be]),
		})
		if end == ntok {
			return units
		}
	}
}

// offsets returns the byte offset of every token of text and then
// len(text): byte-level BPE tokens concatenate back to the text exactly,
// so token byte lengths add up. Valid UTF-8 is split by tokenEnds; other
// text by tiktoken-go, which reads every invalid byte as U+FFFD.
func (t *Tokenizer) offsets(text string) []int {
	if utf8.ValidString(text) {
		return t.tokenEnds(text, make([]int, 1, len(text)/4+2))
	}
	ids := t.enc.EncodeOrdinary(text)
	offsets := make([]int, len(ids)+1)
	for i, id := range ids {
		offsets[i+1] = offsets[i] + len(t.enc.Decode([]int{id}))
	}
	if len(ids) > 0 && offsets[len(ids)] != len(text) {
		// Cannot happen with cl100k_base's ordinary encoding; if it ever does,
		// clamp rather than slice out of range.
		offsets[len(ids)] = len(text)
	}
	return offsets
}

// ContentHash is the hex sha256 of a text unit's text.
func ContentHash(text string) string {
	h := sha256.Sum256([]byte(text))
	return hex.EncodeToString(h[:])
}

// UnitsText rebuilds a document's text from its text units, which cover
// it from offset 0 with overlaps (Chunk).
func UnitsText(units []events.TextUnit) string {
	us := slices.Clone(units)
	slices.SortStableFunc(us, func(a, b events.TextUnit) int { return a.Start - b.Start })
	var b strings.Builder
	end := 0
	for _, u := range us {
		if u.End <= end {
			continue
		}
		from := max(end-u.Start, 0)
		if from > len(u.Text) {
			from = len(u.Text)
		}
		b.WriteString(u.Text[from:])
		end = u.End
	}
	return b.String()
}
