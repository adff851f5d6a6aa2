// Notifications: the searchable, paged list (GET /emulator/v1/notifications with q=, cursor=).
import { h, put, api, notice, dateTime, displayChip, tokenText, qs } from "../lib.js";

export const PAGE = 50;

/** The alert's title and body, from either provider's payload. */
export function alertOf(n) {
  const p = n.payload || {};
  if (n.provider === "apns") {
    const alert = (p.aps || {}).alert;
    if (typeof alert === "string") return { title: "", body: alert };
    return { title: (alert && alert.title) || "", body: (alert && alert.body) || "" };
  }
  const an = ((p.android || {}).notification) || {};
  const nn = p.notification || {};
  return { title: an.title || nn.title || "", body: an.body || nn.body || "" };
}

export async function render(main, { query, isCurrent }) {
  const q = query.get("q") || "";
  const cursor = query.get("cursor") || "";
  const back = query.get("back") || "";
  const box = h("input", { type: "search", name: "q", id: "search", value: q, placeholder: "words, provider:fcm, token:…, campaign:…, display:not-shown, has:lint, after:30m", "aria-label": "Search notifications" });
  const form = h("form", { class: "row", role: "search", onsubmit: (e) => { e.preventDefault(); location.hash = "#/notifications" + qs({ q: box.value.trim() }); } },
    box, h("button", { type: "submit", class: "primary" }, "Search"));
  const out = h("div", {}, notice("Loading…"));
  const clear = h("button", { type: "button", class: "danger", onclick: async () => {
    if (!confirm(q ? `Forget every notification matching “${q}”?` : "Forget every notification?")) return;
    const r = await api("/emulator/v1/notifications" + qs({ q }), { method: "DELETE" });
    put(out, notice(`${r.deleted} forgotten.`));
    setTimeout(() => { if (isCurrent()) location.reload(); }, 600);
  } }, q ? "Delete matches" : "Delete all");
  put(main, h("h1", {}, "Notifications"), h("div", { class: "row" }, form, clear),
    h("p", { class: "muted" }, "Search terms are the admin API's q=: ", h("code", {}, "provider: token: topic: campaign: app: environment: status: reason: after: before: has:warnings has:lint display: lint:"), " and free words in the alert."),
    out);

  const page = await api("/emulator/v1/notifications" + qs({ q, order: "desc", limit: PAGE, cursor }));
  if (!isCurrent()) return;
  const list = page.notifications || [];
  if (!list.length) {
    put(out, notice(cursor ? "No older notifications." : "No notifications match. Send a push, or change the search."));
    return;
  }
  const rows = list.map((n) => {
    const { title, body } = alertOf(n);
    const link = `#/notifications/${encodeURIComponent(n.id)}`;
    const tr = h("tr", { class: "clickable" },
      h("td", { class: "mono" }, dateTime(n.receivedAt)),
      h("td", {}, n.provider),
      h("td", {}, h("a", { href: link }, title || body || "(no alert)"), title && body ? h("div", { class: "muted" }, body) : ""),
      h("td", {}, tokenText(n.token)),
      h("td", {}, n.topic || ""),
      h("td", {}, displayChip(n.display)),
      h("td", {}, (n.lint || []).length ? h("span", { class: "chip warn" }, `${n.lint.length} lint`) : "", (n.warnings || []).length ? h("span", { class: "chip warn" }, `${n.warnings.length} warnings`) : ""));
    tr.addEventListener("click", (e) => { if (e.target.tagName !== "A") location.hash = link; });
    return tr;
  });
  const nav = h("div", { class: "row" },
    cursor ? h("a", { class: "button", href: "#/notifications" + qs({ q, cursor: back.split(",").filter(Boolean).slice(-1)[0], back: back.split(",").filter(Boolean).slice(0, -1).join(",") }) }, "← Newer") : "",
    page.next ? h("a", { class: "button", id: "older", href: "#/notifications" + qs({ q, cursor: page.next, back: [...back.split(",").filter(Boolean), cursor].join(",") }) }, "Older →") : "",
    h("span", { class: "muted" }, `${list.length} shown, newest first`));
  put(out, h("div", { class: "scroll" }, h("table", { id: "notifications" },
    h("thead", {}, h("tr", {}, ["Received", "Provider", "Alert", "Token", "Topic", "Display", "Checks"].map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, rows))), nav);
}
