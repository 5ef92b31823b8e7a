package main

import (
	"fmt"
	"io"
	"strings"
)

// printResult prints an API answer: JSON with --json, else a table or text
// made for reading.
func printResult(g *globals, kind string, out map[string]any) error {
	if g.json {
		return writeJSON(g.stdout, out)
	}
	w := g.stdout
	switch kind {
	case "paths":
		tw := table(g)
		fmt.Fprintln(tw, "TERMINAL\tTYPE\tPATHS")
		for _, t := range asList(out["terminals"]) {
			m := asMap(t)
			fmt.Fprintf(tw, "%v\t%v\t%v\n", m["name"], m["type"], m["paths"])
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if rows := asList(out["rows"]); len(rows) > 0 {
			fmt.Fprintln(w, "\npaths:")
			for _, r := range rows {
				var parts []string
				for _, e := range asList(asMap(r)["edges"]) {
					em := asMap(e)
					parts = append(parts, fmt.Sprintf("%v -%v-> %v %s", em["source"], em["relation"], em["target"], cites(em["citations"])))
				}
				fmt.Fprintln(w, "  "+strings.Join(parts, "  "))
			}
		}
		if out["truncated"] == true {
			fmt.Fprintln(w, "(truncated)")
		}
		printPage(w, "terminals", len(asList(out["terminals"])), out)
	case "aggregate":
		tw := table(g)
		fmt.Fprintln(tw, "TARGET\tCOUNT\tMEMBERS")
		for _, gr := range asList(out["groups"]) {
			m := asMap(gr)
			var names []string
			for _, mem := range asList(m["members"]) {
				names = append(names, fmt.Sprint(asMap(mem)["name"]))
			}
			// A member window lists some members; the count is all of them.
			if count, _ := m["count"].(float64); int(count) > len(names) && out["page"] != nil {
				names = append(names, fmt.Sprintf("(%d of %d listed)", len(names), int(count)))
			}
			fmt.Fprintf(tw, "%v\t%v\t%s\n", asMap(m["target"])["name"], m["count"], strings.Join(names, ", "))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		printPage(w, "groups", len(asList(out["groups"])), out)
	case "entities":
		tw := table(g)
		fmt.Fprintln(tw, "ID\tTYPE\tNAME")
		list := asList(out["entities"])
		for _, e := range list {
			m := asMap(e)
			fmt.Fprintf(tw, "%v\t%v\t%v\n", m["id"], m["type"], m["name"])
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(w, "%d of %v\n", len(list), out["total"])
	case "entity":
		fmt.Fprintf(w, "%v (%v)  %v\n", out["name"], out["type"], out["id"])
		fmt.Fprintln(w, "cited by:", cites(out["citations"]))
		for _, d := range asList(out["descriptions"]) {
			if m := asMap(d); m != nil {
				fmt.Fprintf(w, "  %v\n", firstOf(m, "text", "description"))
			}
		}
		tw := table(g)
		fmt.Fprintln(tw, "DIRECTION\tRELATION\tENTITY\tCITATIONS")
		for _, dir := range []string{"out", "in"} {
			for _, e := range asList(out[dir]) {
				m := asMap(e)
				n := asMap(m["neighbor"])
				fmt.Fprintf(tw, "%s\t%v\t%v (%v)\t%s\n", dir, m["relation"], n["name"], n["id"], cites(m["citations"]))
			}
		}
		return tw.Flush()
	case "communities":
		tw := table(g)
		fmt.Fprintln(tw, "ID\tLEVEL\tSIZE\tPARENT\tREPORT")
		for _, c := range asList(out["communities"]) {
			m := asMap(c)
			fmt.Fprintf(tw, "%v\t%v\t%v\t%v\t%v\n", m["id"], m["level"], m["size"], m["parent"], m["report_id"])
		}
		return tw.Flush()
	case "report":
		fmt.Fprintf(w, "%v  (community %v, level %v, rating %v)\n\n%v\n", out["title"], out["community"], out["level"], out["rating"], out["summary"])
		for i, f := range asList(out["findings"]) {
			m := asMap(f)
			fmt.Fprintf(w, "\n%d. %v %s\n   %v\n", i+1, m["summary"], cites(m["citations"]), m["explanation"])
		}
		fmt.Fprintln(w, "\nsources:", cites(out["sources"]))
	default:
		if a, ok := out["answer"]; ok {
			fmt.Fprintln(w, a)
			printCitations(w, out)
			return nil
		}
		return writeJSON(w, out)
	}
	return nil
}

// printCitations lists an answer's citations, by document title where the
// API gives one (a citation's "title", or the answer's "documents" table).
func printCitations(w io.Writer, out map[string]any) {
	titles := map[string]string{}
	for _, d := range asList(out["documents"]) {
		m := asMap(d)
		if id, t := fmt.Sprint(m["id"]), m["title"]; t != nil && t != "" {
			titles[id] = fmt.Sprint(t)
		}
	}
	list := asList(out["citations"])
	if len(list) == 0 {
		fmt.Fprintln(w, "\nno citations")
		return
	}
	fmt.Fprintln(w, "\ncitations:")
	for i, c := range list {
		m := asMap(c)
		id := fmt.Sprint(m["doc_id"])
		title, _ := m["title"].(string)
		if title == "" {
			title = titles[id]
		}
		ref := fmt.Sprintf("%s@v%v", id, m["version"])
		if title != "" {
			fmt.Fprintf(w, "  [%d] %s (%s)\n", i+1, title, ref)
		} else {
			fmt.Fprintf(w, "  [%d] %s\n", i+1, ref)
		}
	}
}

func firstOf(m map[string]any, keys ...string) any {
	for _, k := range keys {
		if v, ok := m[k]; ok {
			return v
		}
	}
	return m
}

func cites(v any) string {
	var parts []string
	for _, c := range asList(v) {
		m := asMap(c)
		parts = append(parts, fmt.Sprintf("%v@v%v", m["doc_id"], m["version"]))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// printPage says which part of the list a bounded answer (one with a page)
// shows, and the --offset of the next page.
func printPage(w io.Writer, what string, shown int, out map[string]any) {
	p := asMap(out["page"])
	if p == nil {
		return
	}
	total, _ := p["total"].(float64)
	offset, _ := p["offset"].(float64)
	line := fmt.Sprintf("%d of %d %s from offset %d", shown, int(total), what, int(offset))
	if next, ok := p["next_offset"].(float64); ok {
		line += fmt.Sprintf("; next page: --offset %d", int(next))
	}
	fmt.Fprintln(w, line)
}
