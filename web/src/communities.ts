// Communities: the hierarchy as a tree (levels, parent to children,
// sizes) with report titles, ratings and
// findings, each finding with its citations.
import { api, Community, Report } from "./api";
import { Citations } from "./cites";
import { add, clear, h, status } from "./dom";
import type { Ctx } from "./main";

export async function communitiesPage(ctx: Ctx, open: string): Promise<void> {
  const main = ctx.main;
  main.appendChild(h("h1", {}, "Communities"));
  const r = await api<{ communities: Community[] }>("GET", "/v1/communities");
  if (!r.communities.length) { main.appendChild(h("p", {}, "No community you can read yet.")); return; }
  const byID = new Map(r.communities.map((c) => [c.id, c]));
  const levels = [...new Set(r.communities.map((c) => c.level))].sort((a, b) => a - b);
  const panel = h("aside", { id: "evidence", "aria-label": "Evidence", hidden: true });
  const detail = h("section", { id: "report", "aria-live": "polite", "aria-label": "Report" });
  const list = h("div", { id: "community-list" });
  const titles = new Map<string, string>();
  // The hierarchy as a tree: roots are the communities without a readable
  // parent; each node lists its readable children, largest first.
  const bySize = (a: Community, b: Community) => b.size - a.size || a.id.localeCompare(b.id);
  // A child is linked from its parent's children or by its own parent.
  const kidIDs = new Map<string, Set<string>>();
  for (const c of r.communities) {
    for (const ch of c.children || []) if (byID.has(ch)) (kidIDs.get(c.id) || kidIDs.set(c.id, new Set()).get(c.id)!).add(ch);
    if (c.parent && byID.has(c.parent)) (kidIDs.get(c.parent) || kidIDs.set(c.parent, new Set()).get(c.parent)!).add(c.id);
  }
  const kids = (c: Community) => [...(kidIDs.get(c.id) || [])].map((id) => byID.get(id)!).sort(bySize);
  const seen = new Set<string>();
  const node = (c: Community): HTMLElement => {
    seen.add(c.id);
    const b = h("button", { type: "button", class: "linkish", "data-community": c.id, onclick: () => { void showReport(detail, panel, c); } },
      c.report_id ? `Community ${c.id}` : `Community ${c.id} (no report yet)`);
    const li = h("li", { "data-id": c.id, "data-level": c.level, "data-size": c.size },
      b, h("span", { class: "muted" }, ` level ${c.level} · ${c.size} members`), h("span", { class: "rating", "data-for": c.id }));
    if (c.report_id) titles.set(c.id, c.report_id);
    const ch = kids(c).filter((k) => !seen.has(k.id));
    if (ch.length) {
      li.appendChild(h("span", { class: "muted" }, ` · ${ch.length} sub-communities`));
      li.appendChild(h("ul", { class: "ctree", "aria-label": `Inside community ${c.id}` }, ch.map(node)));
    }
    return li;
  };
  const roots = r.communities.filter((c) => !c.parent || !byID.has(c.parent)).sort((a, b) => a.level - b.level || bySize(a, b));
  const tree = h("ul", { class: "ctree root", id: "community-tree", "aria-label": "Community hierarchy" }, roots.map(node));
  // Anything a cycle or a one-sided link left out is still listed.
  for (const c of r.communities) if (!seen.has(c.id)) tree.appendChild(node(c));
  add(list, h("h2", {}, "Hierarchy"),
    h("p", { class: "muted", id: "community-levels" }, "Levels: " + levels.map((lv) => `${lv} (${r.communities.filter((c) => c.level === lv).length} communities)`).join(", ")),
    tree);
  main.appendChild(h("div", { class: "split" }, list, h("div", {}, detail, panel)));
  // Titles and ratings come from each readable report.
  await Promise.all([...titles.entries()].map(async ([cid, rid]) => {
    try {
      const rep = await api<Report>("GET", "/v1/reports/" + encodeURIComponent(rid));
      const b = list.querySelector(`[data-community="${CSS.escape(cid)}"]`);
      if (b) b.textContent = rep.title;
      const s = list.querySelector(`[data-for="${CSS.escape(cid)}"]`);
      if (s) s.textContent = ` · rating ${rep.rating.toFixed(1)}`;
    } catch { /* a report that became unreadable keeps its plain label */ }
  }));
  list.dataset.titled = "true";
  const first = r.communities.find((c) => c.id === open) || r.communities.find((c) => c.report_id);
  if (first) await showReport(detail, panel, first);
}

async function showReport(out: HTMLElement, panel: HTMLElement, c: Community): Promise<void> {
  clear(out);
  panel.hidden = true;
  if (!c.report_id) { out.appendChild(h("p", {}, "This community has no report you can read yet.")); return; }
  let rep: Report;
  try {
    rep = await api<Report>("GET", "/v1/reports/" + encodeURIComponent(c.report_id));
  } catch (err) {
    out.appendChild(status(err instanceof Error ? err.message : String(err), "error"));
    return;
  }
  const cites = new Citations();
  add(out, h("h2", { id: "report-title" }, rep.title), h("p", { class: "muted" }, `Level ${rep.level} · ${c.size} members · rating ${rep.rating.toFixed(1)}`),
    h("p", {}, rep.summary), h("h3", {}, "Findings"),
    h("ol", { id: "findings" }, rep.findings.map((f) => h("li", {}, h("strong", {}, f.summary), " ", f.explanation, " ", cites.inline(f.citations, f.summary + " " + f.explanation, panel)))));
}
