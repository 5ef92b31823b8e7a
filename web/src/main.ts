// kgstream web UI: a hash-routed single page over the JSON API.
import { api, APIError, Caller, setToken, token } from "./api";
import { add, clear, field, h, status } from "./dom";
import { askPage } from "./ask";
import { entityPage } from "./entity";
import { communitiesPage } from "./communities";
import { documentsPage } from "./documents";
import { opsPage } from "./ops";

export interface Ctx { me: Caller; main: HTMLElement }

let me: Caller | null = null;

function nav(): void {
  const n = document.getElementById("nav")!;
  const who = document.getElementById("who")!;
  clear(n);
  clear(who);
  if (!me) return;
  const pages: [string, string][] = [["#/ask", "Ask"], ["#/entity", "Entities"], ["#/communities", "Communities"], ["#/documents", "Documents"]];
  if (me.admin) pages.push(["#/ops", "Ops"]);
  const cur = location.hash.split("/").slice(0, 2).join("/") || "#/ask";
  for (const [href, label] of pages) {
    n.appendChild(h("a", { href, "aria-current": cur === href ? "page" : undefined }, label));
  }
  const role = me.admin ? "admin" : me.writer ? "writer" : "reader";
  who.appendChild(h("span", {}, `${me.principal} (${role})`));
  who.appendChild(h("button", { type: "button", class: "secondary", onclick: () => { setToken(""); me = null; route(); } }, "Sign out"));
}

function signIn(main: HTMLElement, msg?: string): void {
  clear(main);
  const input = h("input", { type: "password", id: "token", autocomplete: "off", required: true });
  const out = h("div", { id: "signin-status" });
  const form = h("form", { id: "signin", onsubmit: async (e: Event) => {
    e.preventDefault();
    setToken(input.value.trim());
    try {
      me = await api<Caller>("GET", "/v1/me");
      if (!location.hash || location.hash === "#/signin") location.hash = "#/ask";
      route();
    } catch (err) {
      setToken("");
      clear(out);
      out.appendChild(status(err instanceof APIError && err.status === 401 ? "That token was not accepted." : String(err), "error"));
    }
  } },
    field("Bearer token", input, "Kept for this browser tab only."),
    h("button", { type: "submit" }, "Sign in"), out);
  add(main, h("h1", {}, "Sign in"), msg ? status(msg, "error") : null, form);
  input.focus();
}

async function route(): Promise<void> {
  const main = document.getElementById("main")!;
  if (!me && token()) {
    try {
      me = await api<Caller>("GET", "/v1/me");
    } catch {
      setToken("");
    }
  }
  nav();
  if (!me) {
    signIn(main);
    return;
  }
  const parts = location.hash.replace(/^#\/?/, "").split("/");
  const page = parts[0] || "ask";
  const arg = parts.slice(1).map(decodeURIComponent).join("/");
  clear(main);
  const ctx: Ctx = { me, main };
  try {
    switch (page) {
      case "entity": await entityPage(ctx, arg); break;
      case "communities": await communitiesPage(ctx, arg); break;
      case "documents": await documentsPage(ctx, arg); break;
      case "ops": await opsPage(ctx); break;
      default: await askPage(ctx);
    }
  } catch (err) {
    if (err instanceof APIError && err.status === 401) {
      setToken("");
      me = null;
      nav();
      signIn(main, "Your token is no longer accepted; sign in again.");
      return;
    }
    main.appendChild(status(err instanceof Error ? err.message : String(err), "error"));
  }
  const h1 = main.querySelector("h1");
  if (h1 && document.activeElement === document.body) (main as HTMLElement).focus({ preventScroll: true });
}

window.addEventListener("hashchange", () => { void route(); });
void route();
