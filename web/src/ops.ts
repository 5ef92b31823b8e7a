// Ops (admins): the pipeline as /v1/status reports it for your tenant.
// Lag and LLM usage come from every live process that records them (the
// "Reported by" table names them); a stale one is left out of the totals.
import { api, q } from "./api";
import { add, clear, h, status } from "./dom";
import type { Ctx } from "./main";

interface DeadLetter { stream_sequence: number; sequence: number; stage: string; subject: string; error: string; deliveries: number; failed_at: string; msg_id?: string }
interface Lag { p50: number; p99: number; samples: number }
interface LLMUsage {
  documents: number; calls: number; prompt_tokens: number; completion_tokens: number; cost: number;
  calls_per_document: number; cost_per_document: number; by_model?: Record<string, LLMUsage>;
}
interface Source { process: string; service: string; figure: string; age_seconds: number; live: boolean }

const num = (n: number) => (Number.isInteger(n) ? String(n) : n.toFixed(3));

function facts(rows: [string, string | number][], id: string): HTMLElement {
  return h("dl", { class: "facts", id },
    rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, typeof v === "number" ? num(v) : v)]));
}

// table is a captioned table of text cells, a header row of cols.
function table(id: string, caption: string, cols: string[], rows: HTMLTableRowElement[]): HTMLElement {
  return h("table", { id }, h("caption", {}, caption),
    h("thead", {}, h("tr", {}, cols.map((c) => h("th", { scope: "col" }, c)))), h("tbody", {}, rows));
}

export async function opsPage(ctx: Ctx): Promise<void> {
  const main = ctx.main;
  main.appendChild(h("h1", {}, "Ops"));
  if (!ctx.me.admin) { main.appendChild(h("p", { id: "ops-admins-only" }, "Ops figures are for admins.")); return; }
  const s = await api<any>("GET", "/v1/status" + q({ audit: 1 }));
  // The server leaves the pipeline figures out for anyone but an admin.
  if (!s.admin || s.pending === undefined) { main.appendChild(h("p", { id: "ops-admins-only" }, "Ops figures are for admins.")); return; }
  const me = await api<any>("GET", "/v1/me");
  add(main,
    h("section", { "aria-labelledby": "ops-index" }, h("h2", { id: "ops-index" }, "Index"),
      facts([["Tenant", s.tenant], ["Documents", s.documents], ["Applied", s.applied], ["Entities", s.entities], ["Edges", s.edges],
        ["Orphan edges", s.orphan_edges], ["Orphan entities", s.orphan_entities], ["Index mismatches", s.index_mismatches],
        ["Stale reports", s.stale_reports], ["Vector ACL mismatches", s.acl_mismatches ?? 0], ["Vector orphans", s.vector_orphans ?? 0],
        ["Build", me.build || "unknown"]], "ops-facts")),
    lagSection(s.index_lag_seconds, s.stage_lag_seconds || {}, s.pending || {}),
    llmSection(s.llm),
    sourcesSection(s.sources || []),
    s.problems && s.problems.length ? h("section", {}, h("h2", {}, "Problems"), h("ul", {}, s.problems.map((p: string) => h("li", {}, p)))) : null);
  const dl = h("section", { id: "dead-letters", "aria-labelledby": "ops-dl" }, h("h2", { id: "ops-dl" }, `Dead letters (${s.dead_letters})`));
  main.appendChild(dl);
  await deadLetters(dl);
}

// lagSection shows the index lag with its sample count, the lag to each
// stage, and the events pending per stage.
function lagSection(index: Lag | undefined, stages: Record<string, Lag>, pending: Record<string, number>): HTMLElement {
  const lag = index || { p50: 0, p99: 0, samples: 0 };
  const names = Object.keys(stages).sort();
  return h("section", { "aria-labelledby": "ops-lag" }, h("h2", { id: "ops-lag" }, "Lag and pending"),
    facts([["Index lag p50 (s)", lag.p50], ["Index lag p99 (s)", lag.p99], ["Index lag samples", lag.samples],
      ...Object.entries(pending).map(([k, v]) => [`Pending: ${k}`, v] as [string, number])], "ops-pending"),
    names.length
      ? table("ops-stage-lag", "Lag to each stage, in seconds, over the samples of every live process",
        ["Stage", "p50", "p99", "Samples"],
        names.map((n) => h("tr", { "data-stage": n }, h("td", {}, n), h("td", {}, num(stages[n].p50)), h("td", {}, num(stages[n].p99)),
          h("td", {}, String(stages[n].samples)))))
      : h("p", { id: "ops-stage-lag-none" }, "No live process has recorded a lag sample yet."));
}

// llmSection shows the LLM extraction usage of the live extractors, in
// total and by model.
function llmSection(llm: LLMUsage | undefined): HTMLElement {
  const sec = h("section", { "aria-labelledby": "ops-llm" }, h("h2", { id: "ops-llm" }, "LLM usage"));
  if (!llm) {
    add(sec, h("p", { id: "ops-llm-none" }, "No live extractor has recorded LLM usage (extraction runs offline, or no LLM call was made yet)."));
    return sec;
  }
  add(sec, facts([["Documents", llm.documents], ["Calls", llm.calls], ["Prompt tokens", llm.prompt_tokens],
    ["Completion tokens", llm.completion_tokens], ["Cost", llm.cost], ["Calls per document", llm.calls_per_document],
    ["Cost per document", llm.cost_per_document]], "ops-llm-facts"));
  const models = Object.keys(llm.by_model || {}).sort();
  if (models.length) {
    add(sec, table("ops-llm-models", "LLM usage by model, over every live extractor",
      ["Model", "Documents", "Calls", "Prompt tokens", "Completion tokens", "Cost", "Calls per document", "Cost per document"],
      models.map((m) => {
        const u = llm.by_model![m];
        return h("tr", { "data-model": m }, h("td", {}, m ? h("code", {}, m) : "(no model label)"),
          [u.documents, u.calls, u.prompt_tokens, u.completion_tokens, u.cost, u.calls_per_document, u.cost_per_document]
            .map((v) => h("td", {}, num(v))));
      })));
  }
  return sec;
}

// sourcesSection lists the processes that recorded each figure: a stale
// one (stopped, or cut off from NATS) is marked in words, and a missing
// index lag recorder is called out.
function sourcesSection(sources: Source[]): HTMLElement {
  const sec = h("section", { id: "ops-sources", "aria-labelledby": "ops-src" }, h("h2", { id: "ops-src" }, "Reported by"));
  if (!sources.some((r) => r.live && r.figure === "lag.graph")) {
    add(sec, h("p", { id: "ops-lag-silent", class: "warn" }, "No live process records the index lag (lag.graph): the graph stage is silent or stopped."));
  }
  if (!sources.length) {
    add(sec, h("p", {}, "No process has recorded lag or LLM usage yet."));
    return sec;
  }
  const stale = sources.filter((r) => !r.live).length;
  add(sec, table("ops-sources-table",
    `Processes that recorded lag and LLM usage: ${sources.length - stale} live, ${stale} stale (left out of the figures above)`,
    ["Process", "Service", "Figure", "Last recorded", "State"],
    sources.map((r) => h("tr", { class: r.live ? "live" : "stale", "data-process": r.process, "data-figure": r.figure },
      h("td", {}, h("code", {}, r.process)), h("td", {}, r.service), h("td", {}, h("code", {}, r.figure)),
      h("td", {}, `${r.age_seconds.toFixed(1)} s ago`),
      h("td", { class: "state" }, r.live ? "Live" : "Stale: left out")))));
  return sec;
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
