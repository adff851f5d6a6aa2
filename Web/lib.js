// Small helpers shared by the pages: DOM building (text only, never HTML from data), the
// admin API, formatting.

/** Builds an element: h("a", {href: "#"}, "text", child). Attributes starting with "on" are listeners. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k === "style") Object.assign(el.style, v); // CSSOM: allowed by the CSP, unlike a style attribute
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

const SVG = "http://www.w3.org/2000/svg";
/** An SVG element, as h() builds HTML ones. */
export function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) el.setAttribute(k, String(v));
  append(el, children);
  return el;
}

/** An admin API error, with the server's message. */
export class APIError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

/** The scope the dashboard shows (`team:…`, `project:…`, `label:…`; "" for everything), kept per browser. */
export function scope() {
  try { return localStorage.getItem("pushemu.scope") || ""; } catch { return ""; }
}

export function setScope(value) {
  try { if (value) localStorage.setItem("pushemu.scope", value); else localStorage.removeItem("pushemu.scope"); } catch { /* private mode */ }
}

/** The admin API's reads and writes that take `scope=`: the notifications, events, report, campaigns, faults and reset. */
const scopedPaths = /^\/emulator\/v1\/(notifications|events|report|campaigns|faults|reset)(\/latest)?($|\?)/;

/** `path` with the dashboard's scope added where the endpoint takes one. */
export function withScope(path) {
  const s = scope();
  if (!s || !scopedPaths.test(path) || /[?&]scope=/.test(path)) return path;
  return path + (path.includes("?") ? "&" : "?") + "scope=" + encodeURIComponent(s);
}

/** Calls the admin API; JSON in and out. Throws APIError with the server's message. */
export async function api(path, { method = "GET", body, signal } = {}) {
  path = withScope(path);
  const init = { method, headers: { accept: "application/json" }, signal, cache: "no-store" };
  if (body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = typeof body === "string" ? body : JSON.stringify(body);
  }
  const r = await fetch(path, init);
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  if (!r.ok) throw new APIError(r.status, (data && data.error && data.error.message) || `${r.status} ${r.statusText}`);
  return data;
}

/** Replaces the children of `el`. */
export function put(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export function notice(message, kind = "") {
  return h("div", { class: "notice " + kind, role: kind === "error" ? "alert" : "status" }, message);
}

export function time(ms) {
  if (!ms) return "";
  const d = new Date(ms);
  return d.toLocaleTimeString(undefined, { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");
}

export function dateTime(ms) { return ms ? new Date(ms).toLocaleString(undefined, { hour12: false }) : ""; }

/** "now", "12 s ago", "5 min ago"... */
export function relative(ms, now = Date.now()) {
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 5) return "now";
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

export function statusChip(status, reason) {
  const ok = status >= 200 && status < 300;
  return h("span", { class: "chip " + (ok ? "ok" : "bad") }, String(status), reason ? " " + reason : "");
}

export function displayChip(display) {
  if (!display) return "";
  const kind = { shown: "ok", quiet: "info", "not-shown": "warn" }[display.outcome] || "";
  return h("span", { class: "chip " + kind, title: display.message || "" }, display.outcome, display.reason ? ` · ${display.reason}` : "");
}

export function tokenText(token) { return h("span", { class: "token mono", title: token }, token || "—"); }

/** Sets the header's status line (connection state, errors). */
export function status(text) {
  const el = document.getElementById("status");
  if (el) el.textContent = text;
}

/** Query string from an object, skipping empty values. */
export function qs(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") u.set(k, String(v));
  const t = u.toString();
  return t ? "?" + t : "";
}

/** Offers `text` as a file download. */
export function download(name, text, type = "application/json") {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = h("a", { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

/** Copies text; where the clipboard is not allowed (no secure context) selects it in a box instead. */
export async function copy(text, fallbackInto) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    if (fallbackInto) {
      const area = h("textarea", { rows: 6, cols: 80, readonly: true, "aria-label": "Copy this text" }, text);
      put(fallbackInto, area);
      area.select();
    }
    return false;
  }
}

/** A form's fields as an object (empty ones left out). */
export function fields(form) {
  const out = {};
  for (const [k, v] of new FormData(form).entries()) if (v !== "") out[k] = v;
  return out;
}
