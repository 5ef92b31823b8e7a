// Ask: a question in one of the modes, the answer with numbered citations,
// and the evidence panel a citation opens.
import { api, Citation, DriftTree, Entity, Edge, GlobalStats, q, QueryResponse } from "./api";
import { Citations, stripTags } from "./cites";
import { add, clear, entityHref, field, h, status } from "./dom";
import type { Ctx } from "./main";

const modes = ["auto", "local", "global", "basic", "drift", "aggregate", "paths"];

interface AggregateResponse { groups: { target: Entity; count: number; members: (Entity & { citations: Citation[] })[] }[] }
interface PathsResponse { start: Entity; terminals: (Entity & { paths: number })[]; rows: { nodes: Entity[]; edges: Edge[] }[]; truncated: boolean }

export async function askPage(ctx: Ctx): Promise<void> {
  const main = ctx.main;
  const mode = h("select", { id: "mode" }, modes.map((m) => h("option", { value: m }, m)));
  const question = h("input", { type: "text", id: "question", placeholder: "e.g. What broke logins?", autocomplete: "off" });
  const aggType = h("input", { type: "text", id: "agg-type", value: "incident" });
  const aggRel = h("input", { type: "text", id: "agg-rel", value: "affected" });
  const pathStart = h("input", { type: "text", id: "path-start", value: "service:token-issuer" });
  const pathRels = h("input", { type: "text", id: "path-rels", value: "~affected" });
  const aggFields = h("div", { class: "row", id: "aggregate-fields", hidden: true },
    field("Entity type", aggType), field("Relation (~ for incoming)", aggRel));
  const pathFields = h("div", { class: "row", id: "paths-fields", hidden: true },
    field("Start (TYPE:NAME)", pathStart), field("Relations, comma-separated", pathRels));
  const questionField = field("Question", question);
  const showFields = () => {
    aggFields.hidden = mode.value !== "aggregate";
    pathFields.hidden = mode.value !== "paths";
    questionField.hidden = mode.value === "aggregate" || mode.value === "paths";
  };
  mode.addEventListener("change", showFields);
  const result = h("section", { id: "answer", "aria-live": "polite", "aria-label": "Answer" });
  const panel = h("aside", { id: "evidence", "aria-label": "Evidence", hidden: true });
  const form = h("form", { id: "ask", onsubmit: async (e: Event) => {
    e.preventDefault();
    clear(result);
    panel.hidden = true;
    result.appendChild(status("Asking…"));
    performance.mark("ask-start");
    try {
      const m = mode.value;
      if (m === "aggregate") {
        renderAggregate(result, panel, await api<AggregateResponse>("GET", "/v1/aggregate" + q({ type: aggType.value.trim(), rel: aggRel.value.trim() })));
      } else if (m === "paths") {
        renderPaths(result, panel, await api<PathsResponse>("GET", "/v1/paths" + q({ start: pathStart.value.trim(), rels: pathRels.value.trim() })));
      } else {
        renderAnswer(result, panel, await api<QueryResponse>("POST", "/v1/query", { mode: m, question: question.value }));
      }
    } catch (err) {
      clear(result);
      result.appendChild(status(err instanceof Error ? err.message : String(err), "error"));
    }
    performance.mark("ask-end");
    performance.measure("ask", "ask-start", "ask-end");
  } },
    h("div", { class: "row" }, field("Mode", mode), questionField),
    aggFields, pathFields,
    h("button", { type: "submit" }, "Ask"));
  add(main, h("h1", {}, "Ask"), form, h("div", { class: "split" }, result, panel));
  question.focus();
}

// tagRE matches an answer's citation tag, "[PM-201 v1; PM-205 v2]".
const tagRE = /\[([^\]]*\bv\d+[^\]]*)\]/g;

// tagged renders answer text whose lines carry "[DOC vN]" tags: each tag
// becomes numbered citation buttons (known is where a tag's text unit is
// looked up).
function tagged(text: string, known: Citation[], cites: Citations, panel: HTMLElement, attrs: Record<string, string> = {}): HTMLElement {
  const body = h("div", { class: "answer-text", ...attrs });
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    const p = h("p", {});
    const claim = stripTags(line);
    let last = 0;
    for (const m of line.matchAll(tagRE)) {
      p.appendChild(document.createTextNode(line.slice(last, m.index)));
      for (const part of m[1].split(";")) {
        const mm = part.trim().match(/^(.+?)\s+v(\d+)/);
        if (!mm) continue;
        const c = known.find((x) => x.doc_id === mm[1] && x.version === Number(mm[2]))
          || { doc_id: mm[1], version: Number(mm[2]) };
        p.appendChild(cites.button(cites.n(c, claim), panel));
      }
      last = (m.index || 0) + m[0].length;
    }
    p.appendChild(document.createTextNode(line.slice(last)));
    body.appendChild(p);
  }
  return body;
}

function renderAnswer(out: HTMLElement, panel: HTMLElement, r: QueryResponse): void {
  clear(out);
  const cites = new Citations();
  const routed = r.routed_to ? h("p", { id: "routed" }, `Auto chose ${r.routed_to} search`,
    r.route ? [": ", h("span", { id: "route-reason" }, r.route)] : ".") : null;
  add(out, h("h2", {}, "Answer"), routed, h("p", { class: "muted", id: "answer-mode" }, `Mode: ${r.mode}` + (r.answer_by ? ` · answered ${r.answer_by}` : "")));
  if (r.mapping && r.mapping.length) {
    const names = new Map(r.entities.map((e) => [e.id, e.name]));
    out.appendChild(h("p", { id: "mapping", class: "muted" }, "Question mapped to: ", r.mapping.map((m, i) =>
      [i ? ", " : "", h("a", { href: entityHref(m.id) }, names.get(m.id) || m.id), ` (${m.how})`])));
  }
  out.appendChild(tagged(r.answer, r.citations, cites, panel, { id: "answer-text" }));
  for (const c of r.citations) cites.n(c, stripTags(r.answer));
  if (r.entities.length) {
    out.appendChild(h("p", {}, "Entities: ", r.entities.map((e, i) => [i ? ", " : "", h("a", { href: entityHref(e.id), class: "entity-link" }, e.name)])));
  }
  if (r.global && r.global.themes && r.global.themes.length) renderThemes(out, r.global);
  if (r.drift) renderDrift(out, panel, r.drift, cites);
  add(out, h("h3", {}, "Citations"), cites.list.length ? cites.legend(panel) : h("p", {}, "No citations."));
  if (r.context.length) {
    const d = h("details", {}, h("summary", {}, `Context (${r.context.length} items)`));
    const ul = h("ul", { class: "context" });
    for (const it of r.context) ul.appendChild(h("li", {}, h("span", { class: "kind" }, it.kind), " ", it.text, " ", cites.inline(it.citations, it.text, panel)));
    d.appendChild(ul);
    out.appendChild(d);
  }
}

// memberHref links a theme member (a name of the theme's subject type)
// to its entity page, which resolves the name as the API does.
function memberHref(subjectType: string, name: string): string {
  return entityHref(subjectType + ":" + name);
}

// renderThemes shows a global answer's themes with their exact counts and
// member incidents, and the coverage line.
function renderThemes(out: HTMLElement, g: GlobalStats): void {
  const table = h("table", { id: "themes" }, h("caption", {}, "Themes (exact counts over the documents you can read)"),
    h("thead", {}, h("tr", {}, ["Theme", "Relation", "Count", "Members"].map((c) => h("th", { scope: "col" }, c)))));
  const tb = h("tbody", {});
  for (const t of g.themes) {
    const members = t.members || [];
    tb.appendChild(h("tr", { "data-theme": t.target.id },
      h("th", { scope: "row" }, h("a", { href: entityHref(t.target.id) }, t.target.name), h("span", { class: "muted" }, ` ${t.target.type}`)),
      h("td", {}, `${t.subject_type} ${t.relation}`),
      h("td", { class: "count" }, String(t.count)),
      h("td", { class: "members" }, members.map((m, i) => [i ? ", " : "", h("a", { href: memberHref(t.subject_type, m), class: "member" }, m)]))));
  }
  table.appendChild(tb);
  add(out, h("h3", {}, "Themes"), table);
  const c = g.coverage;
  if (c) {
    const pct = c.subjects ? Math.round((100 * c.covered) / c.subjects) : 0;
    out.appendChild(h("p", { id: "coverage" }, `Coverage: ${c.covered} of ${c.subjects} ${c.subject_type} entities you can read have a ${c.theme_type} (${pct}%).`));
  }
  out.appendChild(h("p", { class: "muted", id: "global-stats" },
    `Built from ${g.reports_used} reports in ${g.batches} batches (${g.selection}${g.level !== undefined ? " level " + g.level : ""}${g.map_reduce ? ", " + g.map_reduce : ""}).`));
}

// renderDrift shows how a DRIFT answer was built: the primer from the
// closest community reports and the follow-up tree, each branch with its
// question, answer and citations.
function renderDrift(out: HTMLElement, panel: HTMLElement, d: DriftTree, cites: Citations): void {
  // Empty lists may come as null.
  const pr = { reports: d.primer?.reports || [], answer: d.primer?.answer || "", citations: d.primer?.citations || [] };
  const branches = (d.follow_ups || []).map((b) => ({ ...b, answer: b.answer || "", entities: b.entities || [], citations: b.citations || [] }));
  const sec = h("section", { id: "drift", "aria-labelledby": "drift-heading" }, h("h3", { id: "drift-heading" }, "How DRIFT answered"));
  const primer = h("div", { id: "drift-primer", class: "branch" },
    h("h4", {}, "Primer", h("span", { class: "muted" }, ` from ${pr.reports.length} community reports`)),
    tagged(pr.answer, pr.citations, cites, panel),
    pr.citations.length ? h("p", {}, "Sources: ", cites.inline(pr.citations, stripTags(pr.answer), panel)) : null);
  const tree = h("ol", { id: "drift-tree", class: "tree", "aria-label": `Follow-up questions (${d.follow_ups_by})` });
  branches.forEach((b, i) => {
    tree.appendChild(h("li", { class: "branch", "data-branch": i },
      h("h4", { class: "branch-question" }, b.question),
      b.from ? h("p", { class: "muted" }, `Asked from ${b.from}`) : null,
      b.answer.trim() ? tagged(b.answer, b.citations, cites, panel, { class: "answer-text branch-answer" }) : h("p", { class: "branch-answer" }, "No answer from what you can read."),
      b.citations.length ? h("p", { class: "branch-cites" }, "Citations: ", cites.inline(b.citations, stripTags(b.answer), panel)) : null,
      b.entities.length ? h("p", {}, "Entities: ", b.entities.map((e, j) => [j ? ", " : "", h("a", { href: entityHref(e.id) }, e.name)])) : null));
  });
  add(sec, primer, h("p", { class: "muted" }, `${branches.length} follow-up questions (${d.follow_ups_by}):`), tree);
  out.appendChild(sec);
}

function renderAggregate(out: HTMLElement, panel: HTMLElement, r: AggregateResponse): void {
  clear(out);
  const cites = new Citations();
  out.appendChild(h("h2", {}, "Answer"));
  out.appendChild(h("p", { class: "muted", id: "answer-mode" }, "Mode: aggregate (exact counts over admitted edges)"));
  if (!r.groups.length) out.appendChild(h("p", {}, "Nothing you can read matches."));
  const ul = h("ul", { class: "groups", id: "answer-text" });
  for (const g of r.groups) {
    const members = h("ul", {});
    for (const m of g.members) {
      members.appendChild(h("li", {}, h("a", { href: entityHref(m.id) }, m.name), " ", cites.inline(m.citations, `${m.name} ${g.target.name}`, panel)));
    }
    ul.appendChild(h("li", {}, h("a", { href: entityHref(g.target.id) }, g.target.name), h("span", { class: "count" }, ` ${g.count}`), members));
  }
  add(out, ul, h("h3", {}, "Citations"), cites.legend(panel));
}

function renderPaths(out: HTMLElement, panel: HTMLElement, r: PathsResponse): void {
  clear(out);
  const cites = new Citations();
  add(out, h("h2", {}, "Answer"), h("p", { class: "muted", id: "answer-mode" }, `Mode: paths from ${r.start.name}`));
  if (!r.rows.length) out.appendChild(h("p", {}, "No path you can read."));
  const ol = h("ol", { class: "paths", id: "answer-text" });
  for (const row of r.rows) {
    const li = h("li", {});
    row.nodes.forEach((n, i) => {
      if (i > 0) {
        const e = row.edges[i - 1];
        const fwd = e.source === row.nodes[i - 1].id;
        add(li, ` ${fwd ? "—" + e.relation + "→" : "←" + e.relation + "—"} `, cites.inline(e.citations, `${row.nodes[i - 1].name} ${e.relation} ${n.name}`, panel), " ");
      }
      li.appendChild(h("a", { href: entityHref(n.id) }, n.name));
    });
    ol.appendChild(li);
  }
  add(out, ol, r.truncated ? h("p", { class: "muted" }, "More paths exist; the list is capped.") : null, h("h3", {}, "Citations"), cites.legend(panel));
}
