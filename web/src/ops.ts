// Ops (admins): the pipeline as /v1/status reports it for your tenant.
import { api, q } from "./api";
import { add, clear, h, status } from "./dom";
import type { Ctx } from "./main";

interface DeadLetter { stream_sequence: number; sequence: number; stage: string; subject: string; error: string; deliveries: number; failed_at: string; msg_id?: string }

export async function opsPage(ctx: Ctx): Promise<void> {
  const main = ctx.main;
  main.appendChild(h("h1", {}, "Ops"));
  if (!ctx.me.admin) { main.appendChild(h("p", { id: "ops-admins-only" }, "Ops figures are for admins.")); return; }
  const s = await api<any>("GET", "/v1/status" + q({ audit: 1 }));
  // The server leaves the pipeline figures out for anyone but an admin.
  if (!s.admin || s.pending === undefined) { main.appendChild(h("p", { id: "ops-admins-only" }, "Ops figures are for admins.")); return; }
  const me = await api<any>("GET", "/v1/me");
  const num = (n: number) => (Number.isInteger(n) ? String(n) : n.toFixed(3));
  const facts = (rows: [string, string | number][], id: string) => h("dl", { class: "facts", id },
    rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, typeof v === "number" ? num(v) : v)]));
  add(main, 
    h("section", { "aria-labelledby": "ops-index" }, h("h2", { id: "ops-index" }, "Index"),
      facts([["Tenant", s.tenant], ["Documents", s.documents], ["Applied", s.applied], ["Entities", s.entities], ["Edges", s.edges],
        ["Orphan edges", s.orphan_edges], ["Orphan entities", s.orphan_entities], ["Index mismatches", s.index_mismatches],
        ["Stale reports", s.stale_reports], ["Vector ACL mismatches", s.acl_mismatches ?? 0], ["Vector orphans", s.vector_orphans ?? 0],
        ["Build", me.build || "unknown"]], "ops-facts")),
    h("section", { "aria-labelledby": "ops-lag" }, h("h2", { id: "ops-lag" }, "Lag and pending"),
      facts([["Index lag p50 (s)", s.index_lag_seconds?.p50 ?? 0], ["Index lag p99 (s)", s.index_lag_seconds?.p99 ?? 0],
        ...Object.entries(s.pending || {}).map(([k, v]) => [`Pending: ${k}`, v as number] as [string, number])], "ops-pending")),
    h("section", { "aria-labelledby": "ops-llm" }, h("h2", { id: "ops-llm" }, "LLM usage"),
      s.llm ? facts([["Calls", s.llm.calls], ["Prompt tokens", s.llm.prompt_tokens], ["Completion tokens", s.llm.completion_tokens],
        ["Cost", s.llm.cost], ["Calls per document", s.llm.calls_per_document], ["Cost per document", s.llm.cost_per_document]], "ops-llm-facts")
        : h("p", {}, "No LLM extractor runs in this process (offline extraction).")),
    s.problems && s.problems.length ? h("section", {}, h("h2", {}, "Problems"), h("ul", {}, s.problems.map((p: string) => h("li", {}, p)))) : null);
  const dl = h("section", { id: "dead-letters", "aria-labelledby": "ops-dl" }, h("h2", { id: "ops-dl" }, `Dead letters (${s.dead_letters})`));
  main.appendChild(dl);
  await deadLetters(dl);
}

async function deadLetters(sec: HTMLElement): Promise<void> {
  const body = h("div", { "aria-live": "polite" });
  sec.appendChild(body);
  const load = async () => {
    clear(body);
    let r: { dead_letters: DeadLetter[] };
    try {
      r = await api("GET", "/v1/status/deadletters");
    } catch (err) {
      body.appendChild(status(err instanceof Error ? err.message : String(err), "error"));
      return;
    }
    if (!r.dead_letters.length) { body.appendChild(h("p", {}, "None.")); return; }
    const tb = h("tbody", {});
    for (const d of r.dead_letters) {
      tb.appendChild(h("tr", {}, h("td", {}, String(d.stream_sequence)), h("td", {}, d.stage), h("td", {}, h("code", {}, d.subject)),
        h("td", { class: "reason" }, d.error), h("td", {}, String(d.deliveries)), h("td", {}, d.failed_at),
        h("td", {}, h("button", { type: "button", class: "secondary", "aria-label": `Replay dead letter ${d.stream_sequence}`, onclick: async () => {
          try {
            await api("POST", `/v1/status/deadletters/${d.stream_sequence}/replay`);
            await load();
          } catch (err) {
            body.appendChild(status(err instanceof Error ? err.message : String(err), "error"));
          }
        } }, "Replay"))));
    }
    body.appendChild(h("table", { id: "dead-letter-table" }, h("caption", {}, "Dead letters with their reason"),
      h("thead", {}, h("tr", {}, ["Seq", "Stage", "Subject", "Reason", "Deliveries", "Failed at", "Action"].map((c) => h("th", { scope: "col" }, c)))), tb));
  };
  await load();
}
