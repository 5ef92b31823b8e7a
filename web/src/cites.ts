// Numbered citations and the evidence panel they open.
import { api, Citation, q, TextUnit } from "./api";
import { add, clear, documentHref, h, status } from "./dom";

export class Citations {
  list: Citation[] = [];
  claims: string[] = [];

  // n returns the 1-based number of c, adding it when new; claim is the
  // statement the citation supports (used to find its sentence).
  n(c: Citation, claim: string): number {
    const i = this.list.findIndex((x) => x.doc_id === c.doc_id && x.version === c.version && (x.text_unit || "") === (c.text_unit || ""));
    if (i >= 0) return i + 1;
    this.list.push(c);
    this.claims.push(claim);
    return this.list.length;
  }

  // button renders citation number n as a control that opens its evidence.
  button(n: number, panel: HTMLElement): HTMLButtonElement {
    const c = this.list[n - 1];
    const b = h("button", { type: "button", class: "cite", "data-cite": n, "data-doc": c.doc_id,
      "aria-label": `Citation ${n}: ${c.doc_id} version ${c.version}` }, `[${n}]`);
    b.addEventListener("click", () => { void openEvidence(panel, c, this.claims[n - 1], b, n); });
    return b;
  }

  // inline renders a list of citations as numbered buttons.
  inline(cs: Citation[], claim: string, panel: HTMLElement): HTMLElement {
    const span = h("span", { class: "cites" });
    for (const c of cs) span.appendChild(this.button(this.n(c, claim), panel));
    return span;
  }

  // legend lists every citation: number, document and version.
  legend(panel: HTMLElement): HTMLElement {
    const ol = h("ol", { class: "citations", id: "citations", "aria-label": "Citations" });
    this.list.forEach((c, i) => {
      ol.appendChild(h("li", {}, this.button(i + 1, panel), " ", h("span", {}, c.doc_id), h("span", { class: "muted" }, ` v${c.version}`)));
    });
    return ol;
  }
}

// openEvidence shows the cited text unit with its supporting sentence
// marked; Back returns focus to the citation that opened it.
export async function openEvidence(panel: HTMLElement, c: Citation, claim: string, from: HTMLElement | null, n: number): Promise<void> {
  clear(panel);
  panel.hidden = false;
  panel.appendChild(status("Loading the evidence…"));
  let tu: TextUnit;
  try {
    tu = await api<TextUnit>("GET", "/v1/textunit" + q({ doc: c.doc_id, version: c.version, unit: c.text_unit, claim }));
  } catch (err) {
    clear(panel);
    panel.appendChild(status(err instanceof Error ? err.message : String(err), "error"));
    return;
  }
  clear(panel);
  const text = h("p", { class: "unit", id: "evidence-text" });
  tu.sentences.forEach((s, i) => {
    if (i > 0) text.appendChild(document.createTextNode(" "));
    text.appendChild(i === tu.highlight ? h("mark", { id: "evidence-sentence" }, s.text) : document.createTextNode(s.text));
  });
  const back = h("button", { type: "button", class: "secondary", onclick: () => { panel.hidden = true; from?.focus(); } }, `Back to citation [${n}]`);
  add(panel, 
    h("h2", { id: "evidence-title", tabindex: -1 }, h("a", { href: documentHref(tu.doc_id) }, tu.title || tu.doc_id)),
    h("p", { class: "muted" }, `${tu.doc_id} · version ${tu.version}` + (tu.text_unit ? ` · text unit ${tu.text_unit}` : "")),
    text,
    !tu.sentences.length ? h("p", { id: "evidence-record" }, "This source is a structured record (a catalog entry): it has no text; the record itself is the evidence.")
      : tu.highlight < 0 ? h("p", { class: "muted" }, "No single sentence of this unit matches the statement; the whole unit is the evidence.") : null,
    back);
  (panel.querySelector("#evidence-title") as HTMLElement).focus();
}

// stripTags removes the "[DOC v1; DOC v2]" tags answers carry, leaving the claim.
export function stripTags(s: string): string {
  return s.replace(/\[[^\]]*\bv\d+[^\]]*\]/g, "").trim();
}
