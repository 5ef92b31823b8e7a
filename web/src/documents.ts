// Documents: search the documents you may read and open one's indexed
// state; writers add (paste or upload), edit and delete through the
// gateway's document API.
import { api, q, Source, SourceDetail } from "./api";
import { add, clear, documentHref, entityHref, field, h, status } from "./dom";
import type { Ctx } from "./main";

// docPage is how many documents the list shows at a time.
const docPage = 10;

function docPath(id: string): string {
  return "/v1/documents/" + encodeURIComponent(id);
}

export async function documentsPage(ctx: Ctx, id: string): Promise<void> {
  const main = ctx.main;
  const writer = !!(ctx.me.writer || ctx.me.admin);
  main.appendChild(h("h1", {}, id ? "Document" : "Documents"));
  const search = h("input", { type: "search", id: "doc-q", placeholder: "id or title", autocomplete: "off" });
  const results = h("div", { id: "doc-results", "aria-live": "polite" });
  // The list shows a page of documents and a button for the next one: a
  // tenant of 100,000 documents is counted, not sent whole.
  const list = async () => {
    clear(results);
    const text = search.value.trim();
    const page = (offset: number) =>
      api<{ sources: Source[]; total: number }>("GET", "/v1/sources" + q({ q: text, limit: docPage, offset }));
    const first = await page(0);
    results.appendChild(h("p", { class: "muted", id: "doc-count" }, `${first.total} document${first.total === 1 ? "" : "s"}`));
    const ul = h("ul", { class: "list", id: "doc-list" });
    results.appendChild(ul);
    const more = h("button", { type: "button", id: "doc-more" }, "Show more");
    const show = (r: { sources: Source[]; total: number }) => {
      for (const s of r.sources) {
        ul.appendChild(h("li", {}, h("a", { href: documentHref(s.id) }, s.title || s.id), h("span", { class: "muted" }, ` ${s.id} · v${s.version}`)));
      }
      if (ul.children.length >= r.total || !r.sources.length) more.remove();
      else if (!more.isConnected) results.appendChild(more);
    };
    more.addEventListener("click", async () => {
      more.setAttribute("disabled", "");
      try {
        show(await page(ul.children.length));
      } catch (err) {
        results.appendChild(status(err instanceof Error ? err.message : String(err), "error"));
      } finally {
        more.removeAttribute("disabled");
      }
    });
    show(first);
  };
  main.appendChild(h("form", { id: "doc-search", role: "search", onsubmit: (e: Event) => { e.preventDefault(); void list(); } },
    h("div", { class: "row" }, field("Find a document", search), h("button", { type: "submit" }, "Search"))));
  if (id) {
    await showDocument(main, id, writer);
    return;
  }
  main.appendChild(results);
  await list();
  if (writer) main.appendChild(editor(null));
}

async function showDocument(main: HTMLElement, id: string, writer: boolean): Promise<void> {
  let d: SourceDetail;
  try {
    d = await api<SourceDetail>("GET", "/v1/source" + q({ id }));
  } catch (err) {
    main.appendChild(status(err instanceof Error ? err.message : String(err), "error"));
    return;
  }
  const acl = d.acl.public ? "public within the tenant" :
    [...(d.acl.groups || []).map((g) => "group " + g), ...(d.acl.principals || []).map((p) => p)].join(", ") || "you (through your token)";
  const sec = h("section", { id: "document", "aria-labelledby": "doc-title" },
    h("h2", { id: "doc-title" }, d.title || d.id),
    h("dl", { class: "facts" },
      h("dt", {}, "Id"), h("dd", {}, h("code", {}, d.id)),
      h("dt", {}, "Latest version"), h("dd", { id: "doc-version" }, String(d.version)),
      h("dt", {}, "Indexed version"), h("dd", { id: "doc-indexed" }, d.indexed ? `indexed ${d.indexed.version}` : "not indexed yet"),
      h("dt", {}, "Readers"), h("dd", { id: "doc-acl" }, acl),
      d.source ? [h("dt", {}, "Source"), h("dd", {}, d.source)] : null,
      d.indexed ? [h("dt", {}, "Text units"), h("dd", {}, String(d.indexed.text_units))] : null));
  if (d.indexed) {
    const names = new Map(d.indexed.entities.map((e) => [e.id, e.name]));
    add(sec, h("h3", {}, `Entities it contributes (${d.indexed.entities.length})`),
      h("ul", { class: "list", id: "doc-entities" }, d.indexed.entities.map((e) => h("li", {}, h("a", { href: entityHref(e.id) }, e.name), h("span", { class: "muted" }, ` ${e.type}`)))),
      h("h3", {}, `Edges it contributes (${d.indexed.edges.length})`),
      h("ul", { class: "list", id: "doc-edges" }, d.indexed.edges.map((e) => h("li", {}, names.get(e.source) || e.source, ` —${e.relation}→ `, names.get(e.target) || e.target))));
  }
  main.appendChild(sec);
  if (writer) {
    main.appendChild(editor(d));
    const out = h("div", { "aria-live": "polite" });
    const confirmBox = h("div", { hidden: true, id: "doc-delete-ask" },
      h("p", {}, `Delete ${d.id} from the index? This cannot be undone.`),
      h("button", { type: "button", class: "danger", id: "doc-delete-confirm", onclick: async () => {
        try {
          await api("DELETE", docPath(d.id));
          location.hash = "#/documents";
        } catch (err) {
          clear(out);
          add(out, status(err instanceof Error ? err.message : String(err), "error"));
        }
      } }, `Yes, delete ${d.id}`), " ",
      h("button", { type: "button", class: "secondary", onclick: () => { confirmBox.hidden = true; } }, "Keep it"));
    add(main, h("h2", {}, "Delete"), h("button", { type: "button", class: "danger", id: "doc-delete", onclick: () => {
      confirmBox.hidden = false;
      (confirmBox.querySelector("#doc-delete-confirm") as HTMLElement).focus();
    } }, `Delete ${d.id}`), confirmBox, out);
  }
}

// editor is the add form (d null) or the edit form of d.
function editor(d: SourceDetail | null): HTMLElement {
  const idIn = h("input", { type: "text", id: "ed-id", required: true, value: d ? d.id : "", readonly: !!d });
  const title = h("input", { type: "text", id: "ed-title", value: d ? d.title : "" });
  const docType = h("input", { type: "text", id: "ed-type", value: (d && d.indexed && d.indexed.doc_type) || "incident" });
  const text = h("textarea", { id: "ed-text", rows: 8, required: true });
  if (d && d.indexed && (d.indexed as any).text) text.value = (d.indexed as any).text;
  const pub = h("input", { type: "checkbox", id: "ed-public" });
  pub.checked = d ? !!d.acl.public : true;
  const groups = h("input", { type: "text", id: "ed-groups", value: d ? (d.acl.groups || []).join(", ") : "" });
  const file = h("input", { type: "file", id: "ed-file", accept: ".txt,.md,text/plain,text/markdown" });
  file.addEventListener("change", async () => {
    const f = file.files && file.files[0];
    if (!f) return;
    const body = await f.text();
    if (!d) idIn.value = f.name.replace(/\.[^.]*$/, "");
    const first = body.trim().split("\n")[0] || "";
    if (!title.value) title.value = first.trim();
    text.value = body;
  });
  const out = h("div", { id: "ed-status", "aria-live": "polite" });
  const form = h("form", { id: d ? "doc-edit" : "doc-add", onsubmit: async (e: Event) => {
    e.preventDefault();
    clear(out);
    const gs = groups.value.split(",").map((s) => s.trim()).filter(Boolean);
    const acl: Record<string, unknown> = pub.checked ? { public: true } : { groups: gs };
    try {
      const a = await api<{ id: string; version: number }>("POST", "/v1/documents", {
        id: idIn.value.trim(), title: title.value.trim(), text: text.value, doc_type: docType.value.trim(), acl, source: "web",
      });
      out.appendChild(status(`Accepted ${a.id} as version ${a.version}.`));
      out.appendChild(h("a", { href: documentHref(a.id), id: "ed-open" }, `Open ${a.id}`));
    } catch (err) {
      out.appendChild(status(err instanceof Error ? err.message : String(err), "error"));
    }
  } },
    h("h2", {}, d ? "Edit" : "Add a document"),
    d ? null : field("Upload a text file", file, "Fills id, title and text from the file."),
    h("div", { class: "row" }, field("Document id", idIn), field("Title", title), field("Document type", docType)),
    field("Text", text),
    h("div", { class: "row" }, h("div", { class: "field check" }, pub, h("label", { for: "ed-public" }, "Public within the tenant")),
      field("Reader groups (when not public), comma-separated", groups)),
    h("button", { type: "submit" }, d ? "Save a new version" : "Add"), out);
  return form;
}
