// Devices and fleets: paged lists, a device's inbox, install state and Live Activities,
// uninstall / rotate / online / offline, and a form that makes a fleet.
import { h, put, api, notice, dateTime, tokenText, qs, fields } from "../lib.js";

export async function render(main, args) {
  if (args.rest.length) return device(main, args);
  const { query, isCurrent } = args;
  const cursor = query.get("cursor") || "";
  const label = query.get("label") || "";
  const list = h("div", {}, notice("Loading…"));
  const fleets = h("div", {}, notice("Loading…"));
  const made = h("div", { role: "status" });
  const fleetForm = h("form", { class: "inline", id: "fleet-form", onsubmit: async (e) => {
    e.preventDefault();
    const f = fields(e.target);
    const body = { platform: f.platform, app: f.app, count: Number(f.count) };
    if (f.scope) body[f.platform === "android" ? "project" : "environment"] = f.scope;
    if (f.labels) body.labels = f.labels.split(",").map((x) => x.trim()).filter(Boolean);
    try {
      const r = await api("/emulator/v1/fleets", { method: "POST", body });
      put(made, notice(`Made ${r.id} with ${r.count} devices.`));
      loadFleets();
    } catch (err) { put(made, notice(err.message, "error")); }
  } },
    h("label", {}, "Platform", h("select", { name: "platform" }, h("option", { value: "ios" }, "iOS (APNs)"), h("option", { value: "android" }, "Android (FCM)"))),
    h("label", {}, "App", h("input", { name: "app", required: true, value: "com.example.app", size: 22 })),
    h("label", {}, "Devices", h("input", { name: "count", type: "number", min: 1, max: 1099511627776, value: 1000, required: true })),
    h("label", {}, "Environment or project", h("input", { name: "scope", placeholder: "sandbox / my-project", size: 16 })),
    h("label", {}, "Labels", h("input", { name: "labels", placeholder: "a,b", size: 10 })),
    h("button", { type: "submit", class: "primary" }, "Create fleet"));
  const filter = h("form", { class: "row", onsubmit: (e) => { e.preventDefault(); location.hash = "#/devices" + qs({ label: e.target.label.value.trim() }); } },
    h("input", { name: "label", value: label, placeholder: "label", "aria-label": "Only devices with this label" }), h("button", { type: "submit" }, "Filter"));
  // Fleets first: a few rows and the form, above a page of up to 50 devices.
  put(main, h("h1", {}, "Devices and fleets"), h("h2", {}, "Fleets"), fleets, h("h3", {}, "Create a fleet"), fleetForm, made, h("h2", {}, "Devices"), filter, list);

  async function loadFleets() {
    const r = await api("/emulator/v1/fleets");
    if (!isCurrent()) return;
    const rows = (r.fleets || []).map((f) => h("tr", {},
      h("td", { class: "mono" }, f.id), h("td", {}, f.platform), h("td", {}, f.app), h("td", {}, String(f.count)),
      h("td", {}, f.environment || f.project || ""), h("td", {}, (f.labels || []).join(", ")), h("td", {}, dateTime(f.createdAt))));
    put(fleets, rows.length ? h("div", { class: "scroll" }, h("table", { id: "fleets" },
      h("thead", {}, h("tr", {}, ["Fleet", "Platform", "App", "Devices", "Environment", "Labels", "Created"].map((t) => h("th", { scope: "col" }, t)))), h("tbody", {}, rows)))
      : notice("No fleets yet."));
  }

  await loadFleets();
  const page = await api("/emulator/v1/devices" + qs({ limit: 50, cursor, label }));
  if (!isCurrent()) return;
  const rows = (page.devices || []).map((d) => {
    const link = `#/devices/${encodeURIComponent(d.token)}`;
    const tr = h("tr", { class: "clickable" },
      h("td", {}, h("a", { href: link }, tokenText(d.token))), h("td", {}, d.platform), h("td", {}, d.app || ""),
      h("td", {}, h("span", { class: "chip " + (d.installed ? "ok" : "bad") }, d.installed ? "installed" : "uninstalled")),
      h("td", {}, d.appState), h("td", {}, d.permission), h("td", {}, String(d.received)), h("td", {}, d.fleet || ""), h("td", {}, dateTime(d.createdAt)));
    tr.addEventListener("click", (e) => { if (!e.target.closest("a")) location.hash = link; });
    return tr;
  });
  put(list, rows.length ? h("div", { class: "scroll" }, h("table", { id: "devices" },
    h("thead", {}, h("tr", {}, ["Token", "Platform", "App", "Install", "App state", "Permission", "Received", "Fleet", "Created"].map((t) => h("th", { scope: "col" }, t)))), h("tbody", {}, rows)))
    : notice("No devices held as records yet: a push to a new token makes one, or POST /emulator/v1/devices."),
  h("div", { class: "row" },
    cursor ? h("a", { class: "button", href: "#/devices" + qs({ label }) }, "← First page") : "",
    page.next ? h("a", { class: "button", href: "#/devices" + qs({ label, cursor: page.next }) }, "Next →") : ""));
}

async function device(main, { rest, isCurrent }) {
  const token = rest[0];
  const path = `/emulator/v1/devices/${encodeURIComponent(token)}`;
  const out = h("div", { role: "status" });
  async function act(what, method, suffix = "") {
    try {
      await api(path + suffix, { method });
      put(out, notice(`${what}: done.`));
      if (suffix === ":rotate") { /* the answer names the new token; the old one is uninstalled */ }
      setTimeout(() => { if (isCurrent()) draw(); }, 50);
    } catch (e) { put(out, notice(e.message, "error")); }
  }
  async function draw() {
    const [d, inbox, activities] = await Promise.all([
      api(path), api(path + "/inbox").catch(() => ({ inbox: [] })),
      api(path + "/activities").catch(() => ({ activities: [] })),
    ]);
    if (!isCurrent()) return;
    const online = d.appState !== "offline";
    put(main,
      h("p", {}, h("a", { href: "#/devices" }, "← Devices")),
      h("h1", {}, "Device ", h("span", { class: "mono token", title: d.token }, d.token)),
      h("div", { class: "row" },
        h("button", { type: "button", id: "uninstall", class: "danger", disabled: !d.installed, onclick: () => { if (confirm("Uninstall the app? Later pushes get 410 Unregistered / 404 UNREGISTERED.")) act("Uninstalled", "DELETE"); } }, "Uninstall"),
        h("button", { type: "button", id: "rotate", disabled: !d.installed, onclick: () => act("Rotated (the old token is now uninstalled)", "POST", ":rotate") }, "Rotate token"),
        h("button", { type: "button", id: online ? "offline" : "online", onclick: () => act(online ? "Offline" : "Online", "POST", online ? ":offline" : ":online") }, online ? "Take offline" : "Bring online"),
        h("a", { class: "button", href: "#/notifications?q=" + encodeURIComponent(`token:${d.token}`) }, "Its notifications")),
      out,
      h("div", { class: "grid" },
        ...[["Platform", d.platform], ["App", d.app], [d.platform === "android" ? "Project" : "Environment", d.project || d.environment],
          ["Install", d.installed ? "installed" : `uninstalled ${dateTime(d.uninstalledAt)}`], ["App state", d.appState], ["Permission", d.permission],
          ["Received", d.received], ["Opened", d.opened], ["Held offline", d.pending], ["Dropped", d.dropped], ["Fleet", d.fleet], ["Rotated to", d.rotatedTo]]
          .map(([k, v]) => h("div", { class: "card" }, h("div", { class: "muted" }, k), h("div", {}, v === null || v === undefined || v === "" ? "—" : String(v))))),
      h("h2", {}, "Inbox"),
      (inbox.inbox || []).length ? h("div", { class: "scroll" }, h("table", { id: "inbox" },
        h("thead", {}, h("tr", {}, ["Received", "Notification", "App in foreground", "Collapse id", "Live Activity"].map((t) => h("th", { scope: "col" }, t)))),
        h("tbody", {}, [...inbox.inbox].reverse().map((e) => h("tr", {},
          h("td", { class: "mono" }, dateTime(e.receivedAt)),
          h("td", {}, h("a", { href: `#/notifications/${encodeURIComponent(e.notificationId)}`, class: "mono" }, e.notificationId)),
          h("td", {}, e.displayed ? "yes" : "no"), h("td", {}, e.collapseId || ""), h("td", {}, e.activityId ? `${e.activityId} ${e.activityEvent || ""}` : "")))))) : notice("Empty."),
      h("h2", {}, "Live Activities"),
      (activities.activities || []).length ? h("pre", {}, JSON.stringify(activities.activities, null, 2)) : notice("None."),
      h("h2", {}, "Record"), h("pre", {}, JSON.stringify(d, null, 2)));
  }
  await draw();
}
