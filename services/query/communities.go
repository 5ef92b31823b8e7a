package query

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"

	"github.com/kgstream/kgstream/pkg/httpapi"
	"github.com/kgstream/kgstream/pkg/store"
)

type communityJSON struct {
	ID       string   `json:"id"`
	Level    int      `json:"level"`
	Parent   string   `json:"parent"`
	Children []string `json:"children"`
	Size     int      `json:"size"`
	ReportID string   `json:"report_id"`
}

type communitiesResponse struct {
	Communities []communityJSON `json:"communities"`
}

// communities lists the admitted communities, optionally of one level.
// Parent and children links to communities the caller may not see are
// dropped, so the listing reveals nothing of what they cover.
func (s *Service) communities(v *view, _ http.ResponseWriter, r *http.Request) (any, error) {
	levelParam, err := singleParam(r, "level")
	if err != nil {
		return nil, err
	}
	level := -1
	if strings.TrimSpace(levelParam) != "" {
		if level, err = intParam(r, "level", 0, math.MaxInt32); err != nil {
			return nil, err
		}
	}
	cs, err := v.admittedCommunities()
	if err != nil {
		return nil, err
	}
	reports, err := v.admittedReports()
	if err != nil {
		return nil, err
	}
	admitted := make(map[string]bool, len(cs))
	for _, c := range cs {
		admitted[c.ID] = true
	}
	resp := communitiesResponse{Communities: []communityJSON{}}
	for _, c := range cs {
		if level >= 0 && c.Level != level {
			continue
		}
		cj := communityJSON{ID: c.ID, Level: c.Level, Children: []string{}, Size: len(c.Members)}
		if admitted[c.Parent] {
			cj.Parent = c.Parent
		}
		for _, ch := range c.Children {
			if admitted[ch] {
				cj.Children = append(cj.Children, ch)
			}
		}
		if rep, ok := reports[c.ID]; ok {
			cj.ReportID = rep.ID
		}
		resp.Communities = append(resp.Communities, cj)
	}
	return resp, nil
}

type findingJSON struct {
	Summary     string     `json:"summary"`
	Explanation string     `json:"explanation"`
	Citations   []citation `json:"citations"`
}

type reportJSON struct {
	ID        string        `json:"id"`
	Community string        `json:"community"`
	Level     int           `json:"level"`
	Title     string        `json:"title"`
	Summary   string        `json:"summary"`
	Findings  []findingJSON `json:"findings"`
	Rating    float64       `json:"rating"`
	Sources   []citation    `json:"sources"`
}

// reportNotFound is the one answer for an absent report and for one the
// caller may not see, so the response gives no hint which.
func reportNotFound() error {
	return httpapi.Errorf(http.StatusNotFound, "not_found", "report not found")
}

// report shows one admitted report.
func (s *Service) report(v *view, _ http.ResponseWriter, r *http.Request) (any, error) {
	id := r.PathValue("id")
	if id == "" || len(id) > maxRefLen {
		return nil, reportNotFound()
	}
	rep, err := s.st.Report(v.ctx, v.tenant, id)
	// An id the store refuses as malformed cannot name a report either.
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInvalid) {
		return nil, reportNotFound()
	}
	if err != nil {
		return nil, fmt.Errorf("reading report %q: %w", id, err)
	}
	ok, err := v.adm.Derived(rep.Sources)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, reportNotFound()
	}
	return v.reportJSON(rep)
}

// reportJSON renders an admitted report. Finding citations are admitted one
// by one as well: a report is admitted on its Sources, and a citation
// outside them would otherwise pass unchecked.
func (v *view) reportJSON(rep store.Report) (reportJSON, error) {
	out := reportJSON{
		ID: rep.ID, Community: rep.Community, Level: rep.Level, Title: rep.Title,
		Summary: rep.Summary, Rating: rep.Rating, Findings: []findingJSON{}, Sources: []citation{},
	}
	out.Sources = append(out.Sources, rep.Sources...)
	for _, f := range rep.Findings {
		fj := findingJSON{Summary: f.Summary, Explanation: f.Explanation, Citations: []citation{}}
		for _, c := range f.Citations {
			ok, err := v.adm.Direct(c.DocID)
			if err != nil {
				return reportJSON{}, err
			}
			if ok {
				fj.Citations = append(fj.Citations, c)
			}
		}
		out.Findings = append(out.Findings, fj)
	}
	return out, nil
}
