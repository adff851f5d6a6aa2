// Campaigns: every campaign's counts from the journal's index (GET /emulator/v1/campaigns, at
// once on any journal), then the chosen one's full report (GET /emulator/v1/report) and its charts.
import { h, s, put, api, notice, dateTime, withScope } from "../lib.js";

const COLORS = { accepted: "#2f9e44", rejected: "#e03131", succeeded: "#2f9e44", failed: "#e03131", retried: "#e8590c", shown: "#2f9e44", quiet: "#1971c2", "not-shown": "#e8590c" };

/** Horizontal bars, one per [label, value]; an SVG with a <rect> per bar. */
export function bars(rows, { id, title, color = "#2563eb" } = {}) {
  if (!rows.length) return h("figure", {}, title ? h("figcaption", { class: "muted" }, title) : "", notice("None."));
  const max = Math.max(1, ...rows.map((r) => r[1]));
  // The labels' column fits the longest (up to 40 characters, about 7 px each at 12 px).
  const labels = rows.map(([label]) => { const t = String(label); return t.length > 40 ? t.slice(0, 39) + "…" : t; });
  const rowH = 26, left = Math.max(80, 16 + 7 * Math.max(...labels.map((t) => t.length))), width = left + 320;
  const svg = s("svg", { class: "chart", id, role: "img", "aria-label": title, viewBox: `0 0 ${width} ${rows.length * rowH + 6}`, width: "100%", preserveAspectRatio: "xMinYMin meet" });
  rows.forEach(([label, value], i) => {
    const w = Math.round((value / max) * (width - left - 70));
    const y = i * rowH + 4;
    svg.append(
      s("text", { x: left - 8, y: y + 15, "text-anchor": "end" }, labels[i]),
      s("rect", { x: left, y: y + 2, width: Math.max(value > 0 ? 2 : 0, w), height: 18, rx: 3, fill: COLORS[label] || color }, s("title", {}, `${label}: ${value}`)),
      s("text", { x: left + w + 6, y: y + 15 }, String(value)));
  });
  return h("figure", {}, title ? h("figcaption", { class: "muted" }, title) : "", svg);
}

/** The timeline: accepted and rejected per bucket, stacked. */
function timeline(t) {
  const n = (t.sent || []).length;
  if (!n) return notice("No requests.");
  const width = 640, height = 200, left = 40, bottom = 20;
  const max = Math.max(1, ...t.sent);
  const bw = (width - left - 10) / n;
  const y = (v) => height - bottom - (v / max) * (height - bottom - 10);
  const svg = s("svg", { class: "chart", id: "chart-timeline", role: "img", "aria-label": "Requests over time", viewBox: `0 0 ${width} ${height}`, width: "100%" },
    s("line", { class: "axis", x1: left, y1: height - bottom, x2: width - 10, y2: height - bottom }),
    s("text", { x: left - 6, y: 16, "text-anchor": "end" }, String(max)), s("text", { x: left - 6, y: height - bottom, "text-anchor": "end" }, "0"),
    s("text", { x: left, y: height - 4 }, dateTime(t.start)), s("text", { x: width - 10, y: height - 4, "text-anchor": "end" }, `${(t.bucketMs / 1000).toFixed(1)} s buckets`));
  for (let i = 0; i < n; i++) {
    const a = t.accepted[i] || 0, r = t.rejected[i] || 0, x = left + i * bw;
    if (a) svg.append(s("rect", { x, y: y(a), width: Math.max(1, bw - 1), height: height - bottom - y(a), fill: COLORS.accepted }, s("title", {}, `accepted ${a}`)));
    if (r) svg.append(s("rect", { x, y: y(a + r), width: Math.max(1, bw - 1), height: y(a) - y(a + r), fill: COLORS.rejected }, s("title", {}, `rejected ${r}`)));
  }
  return h("figure", {}, h("figcaption", { class: "muted" }, "Requests over time (green accepted, red rejected)"), svg);
}

const nameOf = (c) => (c.campaign === null ? "-" : c.campaign);

export async function render(main, { rest, isCurrent }) {
  put(main, h("h1", {}, "Campaigns"), notice("Loading the campaigns from the journal…"));
  let counts;
  try {
    counts = await api("/emulator/v1/campaigns");
  } catch (e) {
    put(main, h("h1", {}, "Campaigns"), notice(e.status === 404 ? "The journal is off (--journal off): campaigns need it." : e.message, "error"));
    return;
  }
  if (!isCurrent()) return;
  const campaigns = counts.campaigns || [];
  // Opened without one: the newest campaign that has an id (requests without one are a
  // campaign of their own, chosen only when there is no other).
  const newest = campaigns.filter((c) => c.campaign !== null).sort((a, b) => (b.lastAt || 0) - (a.lastAt || 0))[0];
  const chosen = rest.length ? campaigns.find((c) => nameOf(c) === rest[0]) : newest || campaigns[0];
  const list = h("div", { class: "scroll" }, h("table", { id: "campaigns" },
    h("thead", {}, h("tr", {}, ["Campaign", "Sent", "Accepted", "Rejected", "First", "Last"].map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, campaigns.map((c) => h("tr", { class: c === chosen ? "clickable selected" : "clickable" },
      h("td", {}, h("a", { href: `#/campaigns/${encodeURIComponent(nameOf(c))}` }, c.campaign === null ? "(no campaign id)" : c.campaign)),
      h("td", {}, String(c.sent)), h("td", {}, String(c.accepted)), h("td", {}, String(c.rejectedTotal)),
      h("td", {}, dateTime(c.firstAt)), h("td", {}, dateTime(c.lastAt)))))));
  const full = h("section", { id: "campaign-report", "aria-label": "The campaign's full report" });
  const inProgress = h("p", { id: "campaign-progress", class: "muted", "aria-live": "polite" });
  put(main, h("h1", {}, "Campaigns"), h("p", { class: "muted" }, `Counted ${dateTime(counts.generatedAt)} from the journal's index. `, h("a", { href: withScope("/emulator/v1/report?format=html"), target: "_blank", rel: "noopener" }, "HTML report")),
    inProgress, campaigns.length ? list : notice("No requests recorded yet."), chosen ? detail(chosen) : "", chosen ? full : "");
  progress(inProgress, isCurrent);
  if (!chosen) return;
  // The full report (devices, tracking, display, the timeline) reads every record of the
  // journal: on millions of records it takes a while, so the counts above come first.
  put(full, notice("Loading the full report (from the journal index's summaries past 200,000 records)…"));
  let report;
  try {
    report = await api("/emulator/v1/report?format=json" + (chosen.campaign === null ? "" : "&campaign=" + encodeURIComponent(chosen.campaign)));
  } catch (e) {
    if (isCurrent()) put(full, notice(e.message, "error"));
    return;
  }
  if (!isCurrent()) return;
  const c = (report.campaigns || []).find((r) => r.campaign === chosen.campaign);
  put(full, c ? reportDetail(c) : notice("The report has no requests of this campaign."));
}

const pct = (r) => (typeof r === "number" ? `${(r * 100).toFixed(1)}%` : "—");

/** What is still under way, from /emulator/v1/stats every 2 s while the page is open: the SDKs'
 * tracking calls (scheduled, done, waiting in the dispatcher's queue and of those on disk, dropped)
 * and fan-outs. */
async function progress(el, isCurrent) {
  while (isCurrent()) {
    try {
      const st = await api("/emulator/v1/stats");
      const t = st.tracking || {}, f = st.fanOut || {};
      const done = (t.succeeded || 0) + (t.failed || 0);
      put(el, `Tracking: ${t.scheduled || 0} calls scheduled, ${done} done (${t.succeeded || 0} succeeded, ${t.failed || 0} failed), ` +
        `${t.queued || 0} queued (${t.spooled || 0} on disk), ${t.dropped || 0} dropped. Fan-outs: ${f.pending || 0} under way, ${f.delivered || 0} devices reached.`);
    } catch (e) {
      put(el, "");
    }
    await new Promise((r) => setTimeout(r, 2000));
  }
}

/** What the counts tell at once: totals, outcomes, rejections by reason. */
function detail(c) {
  const q = c.campaign === null ? "" : `campaign:${c.campaign.includes(" ") ? JSON.stringify(c.campaign) : c.campaign}`;
  return h("section", { id: "campaign-detail", "aria-label": "Campaign detail" },
    h("h2", {}, c.campaign === null ? "Requests with no campaign id" : `Campaign ${c.campaign}`),
    q ? h("p", {}, h("a", { href: "#/notifications?q=" + encodeURIComponent(q) }, "Its notifications →")) : "",
    h("div", { class: "grid" },
      ...[["Sent", c.sent], ["Accepted", c.accepted], ["Rejected", c.rejectedTotal]]
        .map(([k, v]) => h("div", { class: "card" }, h("div", { class: "muted" }, k), h("div", { class: "big" }, String(v))))),
    h("div", { class: "two" },
      h("div", { class: "panel" }, bars([["accepted", c.accepted], ["rejected", c.rejectedTotal]], { id: "chart-outcomes", title: "Outcomes" })),
      h("div", { class: "panel" }, bars(Object.entries(c.rejected || {}).sort((a, b) => b[1] - a[1]), { id: "chart-rejections", title: "Rejections by reason", color: COLORS.rejected }))));
}

/** What only the full report tells: devices, SDK tracking, display, the timeline. */
function reportDetail(c) {
  const tracking = Object.entries(c.tracking || {});
  return h("div", {},
    h("div", { class: "grid" },
      ...[["Unique devices" + (c.uniqueDevicesError ? ` (estimated, ±${(c.uniqueDevicesError * 100).toFixed(1)}%)` : ""), c.uniqueDevices], ["Receive rate", pct(c.receiveRate)], ["Open rate", pct(c.openRate)]]
        .map(([k, v]) => h("div", { class: "card" }, h("div", { class: "muted" }, k), h("div", { class: "big" }, String(v))))),
    h("div", { class: "two" },
      h("div", { class: "panel" }, tracking.length ? tracking.map(([event, t]) => bars([["succeeded", t.succeeded], ["failed", t.failed], ["retried", t.retried]], { id: `chart-tracking-${event}`, title: `Tracking: ${event} (${t.fired} fired)` })) : notice("No tracking calls.")),
      h("div", { class: "panel" }, bars(Object.entries(c.display || {}), { id: "chart-display", title: "Display on the devices" }))),
    h("div", { class: "panel" }, timeline(c.timeline || {})));
}
