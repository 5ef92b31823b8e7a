package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/kgstream/kgstream/pkg/answereval"
)

// evalAnswersOptions are the settings of `kgstream eval answers`.
type evalAnswersOptions struct {
	Questions []string // question set files (JSON)
	Server    string
	Token     string
	Modes     []string
	Verbose   bool // one line per question and mode
	JSON      bool
}

// evalAnswersCmd is `kgstream eval answers`.
func evalAnswersCmd(g *globals) *cobra.Command {
	var questions []string
	var modes string
	var verbose bool
	c := &cobra.Command{
		Use:   "answers --questions FILE [FILE...]",
		Short: "Ask a labelled question set in each mode and score gold documents cited and facts stated",
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := evalAnswersOptions{Questions: append(append([]string(nil), questions...), args...),
				Server: g.server, Token: g.token, Verbose: verbose, JSON: g.json}
			if len(opts.Questions) == 0 {
				return usageError("eval answers needs --questions FILE; see kgstream eval answers --help")
			}
			for _, m := range strings.Split(modes, ",") {
				if m = strings.TrimSpace(m); m != "" {
					opts.Modes = append(opts.Modes, m)
				}
			}
			if len(opts.Modes) == 0 {
				return usageError("--modes names no mode; see kgstream eval answers --help")
			}
			return evalAnswers(cmd.Context(), g.stdout, opts)
		},
	}
	f := c.Flags()
	f.StringArrayVar(&questions, "questions", nil, "question set (JSON; repeatable)")
	f.StringVar(&modes, "modes", "auto,local,basic,drift", "query modes to score, comma-separated")
	f.BoolVar(&verbose, "verbose", false, "print every question's outcome")
	return c
}

// evalAnswers runs the question sets against the server in every mode and
// prints, per mode, how many questions have a gold document among the
// first three cited documents and how many answers state the fact.
func evalAnswers(ctx context.Context, w io.Writer, opts evalAnswersOptions) error {
	var qs []answereval.Question
	for _, p := range opts.Questions {
		set, err := answereval.Load(p)
		if err != nil {
			return fmt.Errorf("loading %s: %w", p, err)
		}
		qs = append(qs, set...)
	}
	outs, scores, err := answereval.Run(ctx, answereval.HTTPAsker{BaseURL: opts.Server, Token: opts.Token}, qs, opts.Modes)
	if err != nil {
		return fmt.Errorf("asking the questions: %w", err)
	}
	failed := 0
	for _, s := range scores {
		failed += s.Errors
	}
	if opts.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"questions": len(qs), "scores": scores, "outcomes": outs}); err != nil {
			return fmt.Errorf("writing the scores: %w", err)
		}
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		if opts.Verbose {
			fmt.Fprintln(tw, "mode\tquestion\tgold@3\tfact\troute\tms\tfirst cited")
			for _, o := range outs {
				first := o.Docs[:min(len(o.Docs), answereval.TopCited)]
				note := strings.Join(first, " | ")
				if o.Error != "" {
					note = "error: " + o.Error
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.0f\t%s\n", o.Mode, o.Question, yes(o.GoldAt3), yes(o.Fact), o.Route,
					float64(o.Latency.Microseconds())/1000, note)
			}
			fmt.Fprintln(tw)
		}
		fmt.Fprintln(tw, "mode\tquestions\tgold@3\tfact\tnothing matches\terrors\tp50 ms\tp99 ms")
		for _, s := range scores {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\t%.1f\t%.1f\n", s.Mode, s.Questions, share(s.GoldAt3, s.Questions),
				share(s.Fact, s.Questions), s.Nothing, s.Errors, s.P50Millis, s.P99Millis)
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("writing the scores: %w", err)
		}
	}
	if failed > 0 {
		return errors.New(fmt.Sprint(failed, " queries failed"))
	}
	return nil
}

func share(n, of int) string {
	if of == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%.0f%%)", n, 100*float64(n)/float64(of))
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
