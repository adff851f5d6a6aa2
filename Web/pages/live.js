// Live: what happens as it happens, from the event stream (GET /emulator/v1/events), no reload.
import { h, put, api, time, statusChip, displayChip, tokenText, status, qs, withScope } from "../lib.js";

const KEEP = 200;
const WINDOW_MS = 10_000;

export function render(main, { query }) {
  let paused = false;
  let held = 0;
  const heldRows = []; // what arrived while paused, shown on resume (the newest KEEP)
  let source = null;
  const recent = []; // [atMs, provider, status] within the window, for the rates
  const counts = { accepted: 0, rejected: 0, delivered: 0, tracking: 0, fault: 0, device: 0, dropped: 0 };

  const body = h("tbody");
  const rates = h("div", { class: "grid", "aria-label": "Rates over the last 10 seconds" });
  const totals = h("div", { class: "row muted" });
  const state = h("span", { class: "chip", id: "live-state" }, "connecting");
  const pause = h("button", { type: "button", id: "pause", "aria-pressed": "false", onclick: () => togglePause() }, "Pause");
  const filter = h("input", { type: "search", id: "live-filter", name: "q", value: query.get("q") || "", placeholder: "filter: provider:apns status:410 type:rejected token:…", "aria-label": "Filter the stream" });
  const form = h("form", { class: "row", onsubmit: (e) => { e.preventDefault(); location.hash = "#/live" + qs({ q: filter.value }); } }, filter, h("button", { type: "submit" }, "Apply"));

  put(main,
    h("h1", {}, "Live"),
    h("div", { class: "row" }, state, pause, form),
    h("h2", {}, "Rates (last 10 s)"), rates, totals,
    h("h2", {}, "Events"),
    h("div", { class: "scroll" }, h("table", { class: "events", id: "events" },
      h("thead", {}, h("tr", {}, ["Time", "Event", "Provider", "Token", "Status", "Display", "Detail"].map((t) => h("th", { scope: "col" }, t)))),
      body)));

  function togglePause() {
    paused = !paused;
    pause.textContent = paused ? "Resume" : "Pause";
    pause.setAttribute("aria-pressed", String(paused));
    if (!paused && held) {
      for (const r of heldRows.splice(0)) body.prepend(r);
      while (body.childElementCount > KEEP) body.lastElementChild.remove();
      held = 0;
    }
    showState();
  }

  function showState(text) {
    state.textContent = text || (paused ? `paused (${held} held back)` : "live");
    state.className = "chip " + (paused ? "warn" : "ok");
  }

  function row(kind, data) {
    const id = data.id;
    const detail = kind === "tracking" ? `${data.event} ${data.preset} → ${data.status || data.error || ""} (${data.outcome})`
      : kind === "fault" ? `rule ${data.rule}`
      : kind === "device" ? `${data.change}${data.fleet ? " " + data.fleet : ""}`
      : kind === "dropped" ? `${data.dropped} events lost (the page read too slowly)`
      : data.topic || "";
    const tr = h("tr", { class: id ? "clickable" : "", dataset: id ? { kind, id } : { kind } },
      h("td", { class: "mono" }, time(data.at || Date.now())),
      h("td", {}, h("span", { class: "chip " + ({ accepted: "ok", rejected: "bad", fault: "warn", dropped: "warn" }[kind] || "info") }, kind)),
      h("td", {}, data.provider || (data.platform ? (data.platform === "ios" ? "apns" : "fcm") : "")),
      h("td", {}, tokenText(data.token || "")),
      h("td", {}, data.status ? statusChip(data.status, data.reason) : ""),
      h("td", {}, displayChip(data.display)),
      h("td", {}, data.node ? h("span", { class: "chip info", title: "the cluster node" }, data.node) : "",
        id ? h("a", { href: `#/notifications/${encodeURIComponent(id)}` }, detail || "open") : detail));
    if (id) tr.addEventListener("click", (e) => { if (e.target.tagName !== "A") location.hash = `#/notifications/${encodeURIComponent(id)}`; });
    return tr;
  }

  function add(kind, data) {
    counts[kind] = (counts[kind] || 0) + 1;
    if ((kind === "accepted" || kind === "rejected") && data.provider) recent.push([Date.now(), data.provider, data.status]);
    if (paused) {
      held++;
      heldRows.push(row(kind, data));
      if (heldRows.length > KEEP) heldRows.shift();
      showState();
      return;
    }
    body.prepend(row(kind, data));
    while (body.childElementCount > KEEP) body.lastElementChild.remove();
  }

  function drawRates() {
    const now = Date.now();
    while (recent.length && recent[0][0] < now - WINDOW_MS) recent.shift();
    const by = new Map();
    for (const [, provider, st] of recent) {
      const k = `${provider} ${st}`;
      by.set(k, (by.get(k) || 0) + 1);
    }
    const cards = [...by.entries()].sort().map(([k, n]) => h("div", { class: "card" },
      h("div", { class: "muted" }, k), h("div", { class: "big" }, (n / (WINDOW_MS / 1000)).toFixed(1), h("span", { class: "muted" }, " /s"))));
    put(rates, cards.length ? cards : h("div", { class: "muted" }, "No pushes in the last 10 seconds."));
    put(totals, Object.entries(counts).filter(([, n]) => n).map(([k, n]) => h("span", { class: "chip" }, `${k} ${n}`)));
  }

  function connect() {
    const q = query.get("q");
    source = new EventSource(withScope("/emulator/v1/events" + qs({ q })));
    source.onopen = () => { showState(); status(""); };
    source.onerror = async () => {
      if (source.readyState !== EventSource.CLOSED) { showState("reconnecting…"); state.className = "chip bad"; return; }
      // Refused (a bad filter, too many subscribers): say why.
      let why = "the event stream closed";
      try {
        const r = await fetch(withScope("/emulator/v1/events" + qs({ q })), { headers: { accept: "application/json" } });
        if (!r.ok) why = ((await r.json()).error || {}).message || why; else r.body && r.body.cancel();
      } catch {}
      showState(why);
      state.className = "chip bad";
    };
    for (const kind of Object.keys(counts)) {
      source.addEventListener(kind, (e) => {
        try { add(kind, JSON.parse(e.data)); } catch { /* a malformed line is skipped */ }
      });
    }
  }

  /** What happened before the page opened: the newest notifications and tracking calls (a
   * rejection is not kept in memory: they show from now on), under the stream's rows. */
  async function history() {
    if (query.get("q")) { body.append(h("tr", { class: "muted" }, h("td", { colspan: 7 }, "Earlier events are shown without a filter."))); return; }
    const [n, t] = await Promise.all([
      api("/emulator/v1/notifications" + qs({ limit: 50 })).catch(() => ({ notifications: [] })),
      api("/emulator/v1/tracking" + qs({ limit: 50 })).catch(() => ({ tracking: [] })),
    ]);
    const seen = new Set([...body.querySelectorAll("tr[data-id]")].map((r) => r.dataset.id));
    const earlier = [
      ...(n.notifications || []).filter((x) => !seen.has(x.id)).map((x) => ["accepted", { at: x.receivedAt, provider: x.provider, id: x.id, token: x.token, topic: x.topic, status: x.provider === "webpush" ? 201 : 200, display: x.display }]),
      ...(t.tracking || []).map((x) => ["tracking", x]),
    ].sort((a, b) => b[1].at - a[1].at).slice(0, KEEP);
    for (const [kind, data] of earlier) {
      if (body.childElementCount >= KEEP) break;
      const tr = row(kind, data);
      tr.classList.add("earlier");
      body.append(tr);
    }
  }

  connect();
  history();
  drawRates();
  const timer = setInterval(drawRates, 1000);
  return () => { clearInterval(timer); if (source) source.close(); };
}
