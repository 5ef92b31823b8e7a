// Package answereval runs a question set against a query server and scores
// each mode's answers: whether a gold document is among the first cited
// documents (retrieval) and whether the answer states the fact (a regex).
//
// Two question sets live in testdata (see testdata/README.md):
// questions.json, written from the corpora and used to tune the answer
// code, and heldout.json, written before any tuning on it, which must not
// be tuned on: it measures how the answers do on questions nobody fitted
// them to.
package answereval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// Question is one labelled question: the gold documents that answer it and
// a regular expression (case-insensitive) for the fact the answer must state.
type Question struct {
	ID       string   `json:"id"`
	Corpus   string   `json:"corpus"`
	Question string   `json:"question"`
	Gold     []string `json:"gold"`
	Fact     string   `json:"fact"`

	fact *regexp.Regexp
}

// TopCited is how many of the first cited documents may hold a gold one.
const TopCited = 3

// NothingMatches is the start of the answer local search gave when no
// entity matched; an answer starting so counts as "nothing matches".
const NothingMatches = "Nothing in the question matches"

// Load reads and validates a question set (a JSON array of Question).
func Load(path string) ([]Question, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading questions: %w", err)
	}
	return Parse(data)
}

// Parse decodes and validates a question set: every question has an id
// (unique), a question, at least one gold document and a fact regex that
// compiles.
func Parse(data []byte) ([]Question, error) {
	var qs []Question
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&qs); err != nil {
		return nil, fmt.Errorf("decoding questions: %w", err)
	}
	if len(qs) == 0 {
		return nil, errors.New("decoding questions: the set is empty")
	}
	seen := map[string]bool{}
	var errs []error
	for i := range qs {
		q := &qs[i]
		switch {
		case q.ID == "":
			errs = append(errs, fmt.Errorf("question %d: id is empty", i+1))
		case seen[q.ID]:
			errs = append(errs, fmt.Errorf("question %q: id is repeated", q.ID))
		}
		seen[q.ID] = true
		if strings.TrimSpace(q.Question) == "" {
			errs = append(errs, fmt.Errorf("question %q: question is empty", q.ID))
		}
		if len(q.Gold) == 0 {
			errs = append(errs, fmt.Errorf("question %q: no gold document", q.ID))
		}
		re, err := regexp.Compile("(?i)" + q.Fact)
		if err != nil || q.Fact == "" {
			errs = append(errs, fmt.Errorf("question %q: fact %q is not a regular expression: %v", q.ID, q.Fact, err))
			continue
		}
		q.fact = re
	}
	return qs, errors.Join(errs...)
}

// StatesFact reports whether answer matches the question's fact regex.
func (q Question) StatesFact(answer string) bool {
	return q.fact != nil && q.fact.MatchString(answer)
}

// Answer is what a query server answered, as the scorer reads it.
type Answer struct {
	Text string
	// Docs are the cited documents, in citation order, each once.
	Docs []string
	// Route is the mode an auto question was answered in.
	Route string
}

// GoldInTop reports whether one of the first n cited documents is gold.
func (q Question) GoldInTop(a Answer, n int) bool {
	for i, d := range a.Docs {
		if i == n {
			break
		}
		if slices.Contains(q.Gold, d) {
			return true
		}
	}
	return false
}

// Asker answers one question in one mode.
type Asker interface {
	Ask(ctx context.Context, mode, question string) (Answer, error)
}

// HTTPAsker asks POST /v1/query of a kgstream server.
type HTTPAsker struct {
	BaseURL string
	Token   string
	Client  *http.Client
}

// Ask posts the question and reads the answer, its citations and route.
func (h HTTPAsker) Ask(ctx context.Context, mode, question string) (Answer, error) {
	body, err := json.Marshal(map[string]string{"mode": mode, "question": question})
	if err != nil {
		return Answer{}, fmt.Errorf("encoding the query: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(h.BaseURL, "/")+"/v1/query", bytes.NewReader(body))
	if err != nil {
		return Answer{}, fmt.Errorf("building the query: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if h.Token != "" {
		req.Header.Set("Authorization", "Bearer "+h.Token)
	}
	c := h.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return Answer{}, fmt.Errorf("posting the query: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return Answer{}, fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return Answer{}, fmt.Errorf("query answered %d: %s", resp.StatusCode, strings.TrimSpace(string(data)))
	}
	var out struct {
		Answer    string `json:"answer"`
		RoutedTo  string `json:"routed_to"`
		Citations []struct {
			DocID string `json:"doc_id"`
		} `json:"citations"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return Answer{}, fmt.Errorf("decoding the answer: %w", err)
	}
	a := Answer{Text: out.Answer, Route: out.RoutedTo}
	for _, c := range out.Citations {
		if !slices.Contains(a.Docs, c.DocID) {
			a.Docs = append(a.Docs, c.DocID)
		}
	}
	return a, nil
}

// Outcome is one question's result in one mode.
type Outcome struct {
	Question  string        `json:"question"`
	Mode      string        `json:"mode"`
	GoldAt3   bool          `json:"gold_at_3"`
	Fact      bool          `json:"fact"`
	Nothing   bool          `json:"nothing_matches"`
	Route     string        `json:"route,omitempty"`
	Docs      []string      `json:"docs"`
	Error     string        `json:"error,omitempty"`
	Latency   time.Duration `json:"latency_ns"`
	AnswerLen int           `json:"answer_len"`
}

// ModeScore sums one mode's outcomes.
type ModeScore struct {
	Mode      string  `json:"mode"`
	Questions int     `json:"questions"`
	GoldAt3   int     `json:"gold_at_3"`
	Fact      int     `json:"fact"`
	Nothing   int     `json:"nothing_matches"`
	Errors    int     `json:"errors"`
	P50Millis float64 `json:"p50_ms"`
	P99Millis float64 `json:"p99_ms"`
}

// Run asks every question in every mode, in order, and returns the
// outcomes and one score per mode. A failed question is an outcome with
// Error set (it scores nothing); only a cancelled ctx stops the run.
func Run(ctx context.Context, a Asker, qs []Question, modes []string) ([]Outcome, []ModeScore, error) {
	var outs []Outcome
	var scores []ModeScore
	for _, mode := range modes {
		sc := ModeScore{Mode: mode}
		var lat []time.Duration
		for _, q := range qs {
			began := time.Now()
			ans, err := a.Ask(ctx, mode, q.Question)
			o := Outcome{Question: q.ID, Mode: mode, Latency: time.Since(began)}
			if err != nil {
				if ctx.Err() != nil {
					return outs, scores, ctx.Err()
				}
				o.Error = err.Error()
				sc.Errors++
			} else {
				o.GoldAt3 = q.GoldInTop(ans, TopCited)
				o.Fact = q.StatesFact(ans.Text)
				o.Nothing = strings.HasPrefix(ans.Text, NothingMatches)
				o.Route, o.Docs, o.AnswerLen = ans.Route, ans.Docs, len(ans.Text)
				lat = append(lat, o.Latency)
			}
			sc.Questions++
			if o.GoldAt3 {
				sc.GoldAt3++
			}
			if o.Fact {
				sc.Fact++
			}
			if o.Nothing {
				sc.Nothing++
			}
			outs = append(outs, o)
		}
		sc.P50Millis, sc.P99Millis = percentile(lat, 0.50), percentile(lat, 0.99)
		scores = append(scores, sc)
	}
	return outs, scores, nil
}

// percentile is the nearest-rank percentile of ds in milliseconds.
func percentile(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(p*float64(len(s))+0.999999) - 1
	rank = max(0, min(rank, len(s)-1))
	return float64(s[rank].Microseconds()) / 1000
}
