//go:build integration

package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
)

// realCorpora are the three incident corpora the answer questions are about.
var realCorpora = []string{"dfds-postmortems", "cloud-incidents", "wikitech-incidents"}

// TestGlobalCountsEqualAggregateOnCorpora ingests the three real incident
// corpora through the offline extractor into the embedded all-in-one and
// checks that every theme a global answer (and a counting question routed
// by auto) names has exactly the count and members GET /v1/aggregate
// returns, with the coverage line.
func TestGlobalCountsEqualAggregateOnCorpora(t *testing.T) {
	a := startApp(t, app.Config{})
	c := app.NewClient(a.URL(), "")
	ctx := t.Context()
	docs := 0
	for _, corpus := range realCorpora {
		dir, err := filepath.Abs(filepath.Join("../../../../shared/corpora", corpus))
		require.NoError(t, err)
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range entries {
			if e.IsDir() || e.Name() == "LICENSE" || e.Name() == "README.md" {
				continue
			}
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			require.NoError(t, err)
			d := app.DocumentFromFile(e.Name(), data)
			d.DocType = "incident"
			if _, err := c.PostDocument(ctx, d); err == nil {
				docs++
			}
		}
	}
	require.Greater(t, docs, 700)
	eventually(t, 15*time.Minute, "every document applied and reported", func() bool {
		s := status(t, c, false)
		if s.Applied < docs || !idle(s) || s.Pending["clusterer"] != 0 || s.Pending["reporter"] != 0 {
			return false
		}
		var cs struct {
			Communities []json.RawMessage `json:"communities"`
		}
		return get(t, c, "/v1/communities", &cs) == nil && len(cs.Communities) > 0
	})

	for _, q := range []map[string]any{
		{"mode": "global", "question": "What are the recurring root causes of our incidents?"},
		{"mode": "auto", "question": "How many incidents per failure mode?"},
	} {
		var r struct {
			Answer string `json:"answer"`
			Global struct {
				Themes []struct {
					Target struct {
						ID, Type, Name string
					} `json:"target"`
					SubjectType string   `json:"subject_type"`
					Relation    string   `json:"relation"`
					Count       int      `json:"count"`
					Members     []string `json:"members"`
				} `json:"themes"`
				Coverage *struct {
					Subjects int `json:"subjects"`
					Covered  int `json:"covered"`
				} `json:"coverage"`
			} `json:"global"`
		}
		body, _ := json.Marshal(q)
		require.NoError(t, c.Do(ctx, http.MethodPost, "/v1/query", "application/json", body, &r))
		require.NotEmpty(t, r.Global.Themes, r.Answer)
		aggs := map[string]map[string]struct {
			count   int
			members []string
		}{}
		for i, th := range r.Global.Themes {
			key := th.SubjectType + "|" + th.Relation
			if aggs[key] == nil {
				var agg struct {
					Groups []struct {
						Target struct {
							ID string `json:"id"`
						} `json:"target"`
						Count   int `json:"count"`
						Members []struct {
							Name string `json:"name"`
						} `json:"members"`
					} `json:"groups"`
				}
				require.NoError(t, get(t, c, "/v1/aggregate?type="+url.QueryEscape(th.SubjectType)+"&rel="+url.QueryEscape(th.Relation), &agg))
				aggs[key] = map[string]struct {
					count   int
					members []string
				}{}
				for _, g := range agg.Groups {
					var ms []string
					for _, m := range g.Members {
						ms = append(ms, m.Name)
					}
					aggs[key][g.Target.ID] = struct {
						count   int
						members []string
					}{g.Count, ms}
				}
			}
			g, ok := aggs[key][th.Target.ID]
			require.True(t, ok, "theme %s is no group of /v1/aggregate", th.Target.ID)
			require.Equal(t, g.count, th.Count, "%s: %s", q["question"], th.Target.Name)
			require.Equal(t, g.members, th.Members, th.Target.Name)
			if i < 12 {
				require.Contains(t, r.Answer, fmt.Sprintf("%d. %s (%s): %d document", i+1, th.Target.Name, th.Target.Type, th.Count))
			}
		}
		require.NotNil(t, r.Global.Coverage)
		cov := r.Global.Coverage
		require.Contains(t, r.Answer, fmt.Sprintf("Coverage: %d of %d incidents have a detected cause; %d have none.", cov.Covered, cov.Subjects, cov.Subjects-cov.Covered))
		require.Equal(t, docs, cov.Subjects, "every ingested incident is counted")
		t.Logf("%s\n%s", q["question"], strings.Join(strings.Split(r.Answer, "\n")[:min(6, len(strings.Split(r.Answer, "\n")))], "\n"))
	}
}
