// Entity: name, type, aliases, readable descriptions, the neighbourhood as
// an interactive graph (hubs collapsed, click to expand) and the same
// edges as an accessible table.
import cytoscape from "cytoscape";
import { api, APIError, Citation, Edge, Entity, EntityDetail, entityPath, NeighborEdge, q } from "./api";
import { Citations } from "./cites";
import { add, clear, entityHref, field, h, status } from "./dom";
import type { Ctx } from "./main";

// A (relation, direction) group with more neighbours than this is drawn
// as one collapsed hub node until it is expanded.
const hubSize = 6;

const typeColours: Record<string, string> = {
  incident: "#8a2be2", service: "#0b57d0", team: "#1e7d32", resource: "#b3261e",
  failure_mode: "#a04a00", system: "#00658f",
};

function colour(t: string): string {
  return typeColours[t] || "#4a4f55";
}

export async function entityPage(ctx: Ctx, id: string): Promise<void> {
  const main = ctx.main;
  const search = h("input", { type: "search", id: "entity-q", placeholder: "name or part of it", autocomplete: "off" });
  const results = h("div", { id: "entity-results", "aria-live": "polite" });
  const form = h("form", { id: "entity-search", role: "search", onsubmit: async (e: Event) => {
    e.preventDefault();
    clear(results);
    const r = await api<{ entities: Entity[]; total: number }>("GET", "/v1/entities" + q({ q: search.value.trim(), limit: 50 }));
    if (!r.entities.length) { results.appendChild(h("p", {}, "No entity you can read matches.")); return; }
    results.appendChild(h("ul", { class: "list" }, r.entities.map((en) =>
      h("li", {}, h("a", { href: entityHref(en.id) }, en.name), h("span", { class: "muted" }, ` ${en.type}`)))));
  } }, h("div", { class: "row" }, field("Find an entity", search), h("button", { type: "submit" }, "Search")));
  add(main, h("h1", {}, id ? "Entity" : "Entities"), form, results);
  if (!id) { search.focus(); return; }

  let d: EntityDetail;
  try {
    d = await api<EntityDetail>("GET", entityPath(id));
  } catch (err) {
    // Never echo the name: absent and unreadable look the same.
    main.appendChild(status(err instanceof APIError && err.status === 404 ? "No entity you can read has that id." : err instanceof Error ? err.message : String(err), "error"));
    return;
  }
  const names = await api<{ aliases: string[] }>("GET", "/v1/aliases" + q({ id: d.id }));
  const cites = new Citations();
  const panel = h("aside", { id: "evidence", "aria-label": "Evidence", hidden: true });
  const info = h("section", { id: "entity", "aria-labelledby": "entity-name" },
    h("h2", { id: "entity-name" }, d.name),
    h("p", {}, h("span", { class: "kind" }, d.type), " ", h("code", {}, d.id)),
    names.aliases.length ? h("p", { id: "aliases" }, "Also written: " + names.aliases.join(", ")) : null);
  if (d.descriptions.length) {
    add(info, h("h3", {}, "What documents say"), h("ul", { id: "descriptions" }, d.descriptions.map((x) =>
      h("li", {}, x.text, " ", cites.inline(x.citations, x.text, panel)))));
  }
  if (d.citations.length) add(info, h("p", {}, "Mentioned in ", cites.inline(d.citations, d.name, panel)));
  if (d.communities.length) {
    add(info, h("p", { id: "entity-communities" }, "Communities: ", d.communities.map((c, i) => [i ? ", " : "", h("a", { href: "#/communities/" + encodeURIComponent(c) }, c)])));
  }
  const graphBox = h("div", { id: "graph", role: "img", "aria-label": `Graph of ${d.name} and its neighbours; the table below lists the same relationships.` });
  const hint = h("p", { class: "muted" }, "Click a node to expand it (a hub node groups many neighbours); double-click to open it. Keyboard: use the table.");
  const table = h("table", { id: "relationships" });
  const fm = h("section", { id: "failure-modes" });
  add(main, h("div", { class: "split" }, info, panel), fm, h("h2", {}, "Neighbourhood"), hint, graphBox,
    h("h2", { id: "rel-heading" }, "Relationships"), table);
  const g = new Graph(graphBox, d);
  renderTable(table, d, g, cites, panel);
  await failureModes(fm, d, cites, panel);
}

function renderTable(table: HTMLTableElement, d: EntityDetail, g: Graph, cites: Citations, panel: HTMLElement): void {
  table.setAttribute("aria-labelledby", "rel-heading");
  table.appendChild(h("thead", {}, h("tr", {}, ["From", "Relation", "To", "Evidence", "Graph"].map((c) => h("th", { scope: "col" }, c)))));
  const tb = h("tbody", {});
  const row = (e: NeighborEdge, dir: "out" | "in") => {
    const self = h("span", {}, d.name);
    const other = h("a", { href: entityHref(e.neighbor.id) }, e.neighbor.name);
    const expand = h("button", { type: "button", class: "secondary", "aria-label": `Expand ${e.neighbor.name} in the graph`,
      onclick: () => { void g.expand(e.neighbor.id); } }, "Expand");
    tb.appendChild(h("tr", {}, h("td", {}, dir === "out" ? self : other), h("td", {}, e.relation),
      h("td", {}, dir === "out" ? other : self), h("td", {}, cites.inline(e.citations, `${d.name} ${e.relation} ${e.neighbor.name}`, panel)), h("td", {}, expand)));
  };
  d.out.forEach((e) => row(e, "out"));
  d.in.forEach((e) => row(e, "in"));
  if (!d.out.length && !d.in.length) tb.appendChild(h("tr", {}, h("td", { colspan: 5 }, "No relationship you can read.")));
  table.appendChild(tb);
}

interface PathsResponse { rows: { nodes: Entity[]; edges: Edge[] }[]; truncated: boolean }

// failureModeRel is the relation from an incident to its failure mode.
const failureModeRel = "failure";

// failureModes fills sec with the incidents connected to the entity grouped by
// their failure mode, with counts: one GET /v1/paths per way an incident
// is connected to it (relation and direction), followed by the incident's
// failure edge, so every step is read with the caller's admission.
async function failureModes(sec: HTMLElement, d: EntityDetail, cites: Citations, panel: HTMLElement): Promise<void> {
  const incidents = new Map<string, Entity>();
  const hops = new Set<string>();
  for (const [dir, list] of [["out", d.out], ["in", d.in]] as const) {
    for (const e of list) {
      if (e.neighbor.type !== "incident") continue;
      incidents.set(e.neighbor.id, e.neighbor);
      hops.add((dir === "in" ? "~" : "") + e.relation);
    }
  }
  if (d.type === "incident" || !incidents.size) return;
  sec.setAttribute("aria-labelledby", "fm-heading");
  sec.appendChild(h("h2", { id: "fm-heading" }, "Incidents by failure mode around it"));
  sec.appendChild(status("Counting the incidents…"));
  const groups = new Map<string, { mode: Entity; incidents: Map<string, { e: Entity; cites: Citation[] }> }>();
  let truncated = false;
  try {
    for (const hop of [...hops].sort()) {
      const r = await api<PathsResponse>("GET", "/v1/paths" + q({ start: d.id, rels: `${hop},${failureModeRel}` }));
      truncated = truncated || r.truncated;
      for (const row of r.rows) {
        const [, inc, mode] = row.nodes;
        if (!inc || !mode || inc.type !== "incident" || mode.type !== "failure_mode") continue;
        if (!groups.has(mode.id)) groups.set(mode.id, { mode, incidents: new Map() });
        const g = groups.get(mode.id)!;
        if (!g.incidents.has(inc.id)) g.incidents.set(inc.id, { e: inc, cites: row.edges[1] ? row.edges[1].citations : [] });
      }
    }
  } catch (err) {
    clear(sec);
    sec.appendChild(status(err instanceof Error ? err.message : String(err), "error"));
    return;
  }
  sec.removeChild(sec.lastChild!);
  const withMode = new Set<string>();
  for (const g of groups.values()) for (const id of g.incidents.keys()) withMode.add(id);
  const sorted = [...groups.values()].sort((a, b) => b.incidents.size - a.incidents.size || a.mode.name.localeCompare(b.mode.name));
  const table = h("table", { id: "incidents-by-mode", "aria-labelledby": "fm-heading" },
    h("thead", {}, h("tr", {}, ["Failure mode", "Incidents", "Which"].map((c) => h("th", { scope: "col" }, c)))));
  const tb = h("tbody", {});
  for (const g of sorted) {
    const list = [...g.incidents.values()].sort((a, b) => a.e.name.localeCompare(b.e.name));
    tb.appendChild(h("tr", { "data-mode": g.mode.id },
      h("th", { scope: "row" }, h("a", { href: entityHref(g.mode.id) }, g.mode.name)),
      h("td", { class: "count" }, String(list.length)),
      h("td", { class: "members" }, list.map((x, i) => [i ? ", " : "", h("a", { href: entityHref(x.e.id), class: "member", "data-id": x.e.id }, x.e.name),
        " ", cites.inline(x.cites, `${x.e.name} ${failureModeRel} ${g.mode.name}`, panel)]))));
  }
  const none = [...incidents.values()].filter((e) => !withMode.has(e.id)).sort((a, b) => a.name.localeCompare(b.name));
  if (none.length) {
    tb.appendChild(h("tr", { "data-mode": "" },
      h("th", { scope: "row" }, "No failure mode recorded"),
      h("td", { class: "count" }, String(none.length)),
      h("td", { class: "members" }, none.map((e, i) => [i ? ", " : "", h("a", { href: entityHref(e.id), class: "member", "data-id": e.id }, e.name)]))));
  }
  table.appendChild(tb);
  add(sec, h("p", { class: "muted", id: "fm-summary" }, `${incidents.size} incidents you can read are connected to ${d.name}; ${withMode.size} have a failure mode.`),
    table, truncated ? h("p", { class: "muted" }, "Some paths were left out: the paths list is capped.") : null);
}

// Graph draws the neighbourhood with cytoscape and grows it on demand.
class Graph {
  cy: cytoscape.Core;
  expanded = new Set<string>();

  constructor(private box: HTMLElement, d: EntityDetail) {
    this.cy = cytoscape({
      container: box,
      wheelSensitivity: 0.3,
      style: [
        { selector: "node", style: { label: "data(label)", "background-color": "data(colour)", color: "#1b1f23", "font-size": 11,
          "text-valign": "bottom", "text-margin-y": 4, width: 22, height: 22, "text-background-color": "#ffffff", "text-background-opacity": 0.85, "text-background-padding": "2px" } },
        { selector: "node.center", style: { width: 32, height: 32, "border-width": 3, "border-color": "#1b1f23" } },
        { selector: "node.hub", style: { shape: "round-rectangle", width: 40, "background-color": "#5f6368" } },
        { selector: "edge", style: { width: 1.5, "line-color": "#6b7178", "target-arrow-color": "#6b7178", "target-arrow-shape": "triangle",
          "curve-style": "bezier", label: "data(label)", "font-size": 9, color: "#3c4043", "text-rotation": "autorotate",
          "text-background-color": "#ffffff", "text-background-opacity": 0.85 } },
      ],
    });
    (box as any).cy = this.cy;
    this.addNode(d, "center");
    this.expanded.add(d.id);
    this.addEdges(d);
    this.layout();
    this.cy.on("tap", "node", (ev) => {
      const n = ev.target;
      if (n.hasClass("hub")) this.openHub(n.id());
      else void this.expand(n.id());
    });
    this.cy.on("dbltap", "node", (ev) => {
      const n = ev.target;
      if (!n.hasClass("hub")) location.hash = entityHref(n.id());
    });
  }

  addNode(e: Entity, cls = ""): void {
    if (this.cy.getElementById(e.id).nonempty()) return;
    this.cy.add({ group: "nodes", data: { id: e.id, label: e.name, colour: colour(e.type), type: e.type }, classes: cls });
  }

  addEdge(src: string, rel: string, tgt: string): void {
    const id = `${src}|${rel}|${tgt}`;
    if (this.cy.getElementById(id).nonempty()) return;
    this.cy.add({ group: "edges", data: { id, source: src, target: tgt, label: rel } });
  }

  // addEdges adds d's edges; a group of more than hubSize neighbours by one
  // relation and direction becomes one hub node until opened.
  addEdges(d: EntityDetail): void {
    const groups = new Map<string, { dir: "out" | "in"; rel: string; edges: NeighborEdge[] }>();
    for (const [dir, list] of [["out", d.out], ["in", d.in]] as const) {
      for (const e of list) {
        const k = dir + "|" + e.relation;
        if (!groups.has(k)) groups.set(k, { dir, rel: e.relation, edges: [] });
        groups.get(k)!.edges.push(e);
      }
    }
    for (const gr of groups.values()) {
      const fresh = gr.edges.filter((e) => this.cy.getElementById(e.neighbor.id).empty());
      if (fresh.length > hubSize) {
        const hid = `hub:${d.id}|${gr.dir}|${gr.rel}`;
        if (this.cy.getElementById(hid).empty()) {
          this.cy.add({ group: "nodes", data: { id: hid, label: `${gr.rel} (+${fresh.length})`, colour: "#5f6368", members: fresh }, classes: "hub" });
          if (gr.dir === "out") this.addEdge(d.id, gr.rel, hid); else this.addEdge(hid, gr.rel, d.id);
        }
        for (const e of gr.edges.filter((e) => !fresh.includes(e))) this.link(d.id, gr.dir, e);
        continue;
      }
      for (const e of gr.edges) {
        this.addNode(e.neighbor);
        this.link(d.id, gr.dir, e);
      }
    }
    this.box.dataset.hubs = String(this.cy.nodes(".hub").length);
    this.box.dataset.nodes = String(this.cy.nodes().not(".hub").length);
  }

  link(center: string, dir: "out" | "in", e: NeighborEdge): void {
    if (dir === "out") this.addEdge(center, e.relation, e.neighbor.id); else this.addEdge(e.neighbor.id, e.relation, center);
  }

  openHub(hid: string): void {
    const n = this.cy.getElementById(hid);
    const members: NeighborEdge[] = n.data("members");
    const [center, dir] = hid.slice(4).split("|");
    n.remove();
    for (const e of members) {
      this.addNode(e.neighbor);
      this.link(center, dir as "out" | "in", e);
    }
    this.box.dataset.hubs = String(this.cy.nodes(".hub").length);
    this.box.dataset.nodes = String(this.cy.nodes().not(".hub").length);
    this.layout();
  }

  async expand(id: string): Promise<void> {
    if (this.expanded.has(id)) return;
    this.expanded.add(id);
    const d = await api<EntityDetail>("GET", entityPath(id));
    this.addNode(d);
    this.addEdges(d);
    this.box.dataset.expanded = Array.from(this.expanded).join(" ");
    this.layout();
  }

  layout(): void {
    this.cy.layout({ name: "cose", animate: false, nodeDimensionsIncludeLabels: true, padding: 20, randomize: false } as any).run();
  }
}
