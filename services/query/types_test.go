package query_test

import (
	"slices"
	"strconv"
	"strings"

	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/services/query"
)

// Response shapes the tests decode.

type entity struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Name string `json:"name"`
}

type edge struct {
	Source    string                 `json:"source"`
	Relation  string                 `json:"relation"`
	Target    string                 `json:"target"`
	Citations []provenance.SourceRef `json:"citations"`
}

type pathsResp struct {
	Start     entity `json:"start"`
	Terminals []struct {
		entity
		Paths int `json:"paths"`
	} `json:"terminals"`
	Rows []struct {
		Nodes []entity `json:"nodes"`
		Edges []edge   `json:"edges"`
	} `json:"rows"`
	Truncated bool `json:"truncated"`
}

func (p pathsResp) terminalNames() []string {
	out := []string{}
	for _, t := range p.Terminals {
		out = append(out, t.Name)
	}
	return out
}

// docs lists the distinct documents cited anywhere in the rows.
func (p pathsResp) docs() []string {
	var out []string
	for _, r := range p.Rows {
		for _, e := range r.Edges {
			for _, c := range e.Citations {
				out = append(out, c.DocID)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

type aggResp struct {
	Groups []struct {
		Target  entity `json:"target"`
		Count   int    `json:"count"`
		Members []struct {
			entity
			Citations []provenance.SourceRef `json:"citations"`
		} `json:"members"`
	} `json:"groups"`
}

// summary renders groups as "target count [members]" lines, as EXPECTED.md does.
func (a aggResp) summary() []string {
	var out []string
	for _, g := range a.Groups {
		var ms []string
		for _, m := range g.Members {
			ms = append(ms, m.Name)
		}
		out = append(out, g.Target.Name+" "+strconv.Itoa(g.Count)+" ["+strings.Join(ms, ", ")+"]")
	}
	return out
}

type queryResp struct {
	Mode      string                 `json:"mode"`
	Answer    string                 `json:"answer"`
	Entities  []entity               `json:"entities"`
	Context   []query.ContextItem    `json:"context"`
	Citations []provenance.SourceRef `json:"citations"`
	Budget    int                    `json:"budget_tokens"`
	Used      int                    `json:"used_tokens"`
	Timings   map[string]float64     `json:"timings"`
	Mapping   []query.MappedEntity   `json:"mapping"`
	RoutedTo  string                 `json:"routed_to"`
	Route     string                 `json:"route"`
}

type communitiesResp struct {
	Communities []struct {
		ID       string   `json:"id"`
		Level    int      `json:"level"`
		Parent   string   `json:"parent"`
		Children []string `json:"children"`
		Size     int      `json:"size"`
		ReportID string   `json:"report_id"`
	} `json:"communities"`
}

func (c communitiesResp) ids() []string {
	out := []string{}
	for _, x := range c.Communities {
		out = append(out, x.ID)
	}
	return out
}
