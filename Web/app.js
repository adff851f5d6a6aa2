// The dashboard's router: #/page/rest?query -> the page module's render(main, {rest, query}),
// which may give back a function that stops what it started (an event stream, a timer).
import { notice, put, status, scope, setScope } from "./lib.js";
import * as live from "./pages/live.js";
import * as notifications from "./pages/notifications.js";
import * as detail from "./pages/detail.js";
import * as devices from "./pages/devices.js";
import * as campaigns from "./pages/campaigns.js";
import * as faults from "./pages/faults.js";
import * as credentials from "./pages/credentials.js";

const pages = { live, notifications, devices, campaigns, faults, credentials };
let stop = null;
let generation = 0;

function parse() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [path, query = ""] = hash.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { page: parts[0] || "live", rest: parts.slice(1), query: new URLSearchParams(query) };
}

async function route() {
  const { page, rest, query } = parse();
  if (stop) { try { stop(); } catch {} stop = null; }
  const main = document.getElementById("main");
  const mine = ++generation;
  for (const a of document.querySelectorAll("nav a")) {
    if (a.dataset.page === page) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  const module = page === "notifications" && rest.length ? detail : pages[page];
  if (!module) {
    put(main, notice(`No page “${page}”.`, "error"));
    return;
  }
  document.title = `pushemu · ${page[0].toUpperCase()}${page.slice(1)}`;
  try {
    const cleanup = await module.render(main, { rest, query, isCurrent: () => mine === generation });
    if (mine === generation) stop = cleanup || null; else if (cleanup) cleanup();
  } catch (e) {
    if (mine === generation) put(main, notice(e.message || String(e), "error"));
  }
}

/** The header says when the journal or the state log cannot store (a full disk), or a cluster node has lost Redis, from /healthz. */
async function health() {
  const el = document.getElementById("status");
  try {
    const r = await fetch("/healthz", { cache: "no-store" });
    if (r.status === 503) {
      const b = await r.json();
      const parts = [];
      if (b.journal) parts.push(`the journal is failing (${b.journal.error || "unknown error"}): pushes are answered 503 under strict durability`);
      if (b.stateLog) parts.push(`the state log is failing (${b.stateLog.error || "unknown error"}): changes are refused`);
      el.textContent = parts.join("; ");
      el.className = "bad";
    } else {
      const b = await r.json().catch(() => ({}));
      if (b.status === "degraded") {
        const reason = (b.cluster && b.cluster.reason) || "this node cannot reach the cluster's Redis";
        el.textContent = `degraded: ${reason}. It serves pushes with the state it has and refuses changes until Redis answers.`;
        el.className = "bad";
      } else if (el.className === "bad") {
        el.textContent = "";
        el.className = "muted";
      }
    }
  } catch {
    el.textContent = "pushemu is not answering";
    el.className = "bad";
  }
}

// The scope picker: every page reads and resets only that scope's (kept in this browser).
const scopeInput = document.getElementById("scope");
scopeInput.value = scope();
scopeInput.addEventListener("change", () => {
  const v = scopeInput.value.trim();
  if (v && !/^(team|project|label):.+/.test(v)) { status("scope must be team:TEAMID, project:PROJECTID or label:NAME"); return; }
  setScope(v);
  status(v ? `showing scope ${v}` : "showing everything");
  route();
});

window.addEventListener("hashchange", () => { route(); document.getElementById("main").focus({ preventScroll: true }); });
status("");
route();
health();
setInterval(health, 5000);
