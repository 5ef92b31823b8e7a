// Small DOM helpers: every text goes in as text, never as markup.

export type Child = Node | string | number | null | undefined | false | Child[];
type Attrs = Record<string, string | number | boolean | EventListener | undefined>;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") {
      el.addEventListener(k.slice(2), v as EventListener);
    } else if (v === true) {
      el.setAttribute(k, "");
    } else {
      el.setAttribute(k, String(v));
    }
  }
  append(el, children);
  return el;
}

export function append(el: Node, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
  }
}

// add appends children to el, skipping null, undefined and false.
export function add(el: Node, ...children: Child[]): void {
  append(el, children);
}

export function clear(el: Element): void {
  while (el.firstChild) el.removeChild(el.firstChild);
}

// field is a labelled control: the label names it for screen readers.
export function field(label: string, control: HTMLElement, hint?: string): HTMLElement {
  const id = control.id || "f-" + label.toLowerCase().replace(/[^a-z0-9]+/g, "-");
  control.id = id;
  const kids: Child[] = [h("label", { for: id }, label), control];
  if (hint) {
    const hid = id + "-hint";
    control.setAttribute("aria-describedby", hid);
    kids.push(h("span", { class: "hint", id: hid }, hint));
  }
  return h("div", { class: "field" }, kids);
}

export function status(text: string, kind: "info" | "error" = "info"): HTMLElement {
  return h("p", { class: "status " + kind, role: kind === "error" ? "alert" : "status" }, text);
}

export function link(href: string, text: string, attrs: Attrs = {}): HTMLAnchorElement {
  return h("a", { href, ...attrs }, text);
}

export function entityHref(id: string): string {
  return "#/entity/" + encodeURIComponent(id);
}

export function documentHref(id: string): string {
  return "#/documents/" + encodeURIComponent(id);
}
