// The JSON API, called on this origin with the bearer token of the
// signed-in user (kept in sessionStorage, so it ends with the tab).

const tokenKey = "kgstream.token";

export function token(): string {
  return sessionStorage.getItem(tokenKey) || "";
}

export function setToken(t: string): void {
  if (t) sessionStorage.setItem(tokenKey, t);
  else sessionStorage.removeItem(tokenKey);
}

export class APIError extends Error {
  constructor(public status: number, public code: string, message: string) {
    super(message);
  }
}

export async function api<T>(method: string, path: string, body?: unknown, contentType = "application/json"): Promise<T> {
  const headers: Record<string, string> = {};
  const t = token();
  if (t) headers["Authorization"] = "Bearer " + t;
  let payload: BodyInit | undefined;
  if (body !== undefined) {
    headers["Content-Type"] = contentType;
    payload = typeof body === "string" ? body : JSON.stringify(body);
  }
  const resp = await fetch(path, { method, headers, body: payload, cache: "no-store" });
  const text = await resp.text();
  let data: any = undefined;
  try {
    data = text ? JSON.parse(text) : undefined;
  } catch {
    data = undefined;
  }
  if (!resp.ok) {
    const e = data && data.error;
    throw new APIError(resp.status, (e && e.code) || "http_error", (e && e.message) || text || resp.statusText);
  }
  return data as T;
}

export function q(params: Record<string, string | number | undefined>): string {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== "") u.set(k, String(v));
  const s = u.toString();
  return s ? "?" + s : "";
}

export interface Citation { doc_id: string; version: number; text_unit?: string }
export interface Entity { id: string; type: string; name: string }
export interface Edge { source: string; relation: string; target: string; citations: Citation[] }
export interface Caller { tenant: string; principal: string; groups: string[]; admin?: boolean; writer?: boolean }
export interface ContextItem { kind: string; id: string; text: string; citations: Citation[]; tokens: number; score?: number }
export interface GlobalTheme { target: Entity; subject_type: string; relation: string; count: number; members: string[]; reports?: string[] }
export interface Coverage { subject_type: string; theme_type: string; subjects: number; covered: number }
export interface GlobalStats {
  selection: string; level?: number; reports_used: number; batches: number; theme_types: string[];
  map_reduce?: string; themes: GlobalTheme[]; coverage?: Coverage;
}
export interface DriftBranch { question: string; from: string; answer: string; entities: Entity[]; citations: Citation[] }
export interface DriftTree {
  primer: { reports: string[]; answer: string; citations: Citation[] };
  follow_ups: DriftBranch[]; follow_ups_by: string;
}
export interface QueryResponse {
  mode: string; answer: string; entities: Entity[]; context: ContextItem[]; citations: Citation[];
  routed_to?: string; route?: string; mapping?: { id: string; how: string }[]; answer_by?: string;
  timings: Record<string, number>; global?: GlobalStats; drift?: DriftTree; basic?: any;
}
export interface NeighborEdge extends Edge { neighbor: Entity }
export interface EntityDetail extends Entity {
  citations: Citation[]; descriptions: { text: string; citations: Citation[] }[];
  out: NeighborEdge[]; in: NeighborEdge[]; truncated: boolean; communities: string[];
}
export interface Community { id: string; level: number; parent: string; children: string[]; size: number; report_id: string }
export interface Report {
  id: string; community: string; level: number; title: string; summary: string; rating: number;
  findings: { summary: string; explanation: string; citations: Citation[] }[]; sources: Citation[];
}
export interface Source { id: string; title: string; version: number; source?: string; updated_at?: string }
export interface SourceDetail extends Source {
  acl: { public?: boolean; groups?: string[]; principals?: string[] };
  indexed: null | { version: number; applied_at: string; doc_type?: string; text_units: number; entities: Entity[]; edges: Edge[] };
}
export interface TextUnit {
  doc_id: string; title: string; version: number; text_unit: string; text: string;
  sentences: { text: string; start: number; end: number }[]; highlight: number;
}

export function entityPath(id: string): string {
  const i = id.indexOf(":");
  const typ = i < 0 ? id : id.slice(0, i);
  const name = i < 0 ? "" : id.slice(i + 1);
  return "/v1/entities/" + encodeURIComponent(typ) + "/" + encodeURIComponent(name);
}
