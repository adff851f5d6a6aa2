// One notification, whole (GET /emulator/v1/notifications/{id}): previews, checks, the
// tracking calls it caused, its headers and payload, copy as curl and download as .apns.
import { h, put, api, notice, dateTime, displayChip, statusChip, tokenText, copy, download } from "../lib.js";
import { iosBanner, androidEntry, chromeToast, safariBanner, apnsPayloadOf, bundleOf } from "../preview.js";

const quote = (s) => "'" + String(s).replace(/'/g, "'\\''") + "'";

/** A curl command that sends the same push to this pushemu. */
export function curlOf(n, origin = location.origin) {
  const lines = [];
  if (n.provider === "apns") {
    lines.push(`curl --http2-prior-knowledge -X POST ${quote(`${origin}/3/device/${n.token}`)}`);
    lines.push(`  -H "authorization: bearer $APNS_PROVIDER_TOKEN"`);
    for (const [k, v] of Object.entries(n.headers || {})) if (k.startsWith("apns-") && k !== "apns-unique-id") lines.push(`  -H ${quote(`${k}: ${v}`)}`);
    lines.push(`  --data-binary ${quote(JSON.stringify(n.payload))}`);
  } else {
    lines.push(`curl -X POST ${quote(`${origin}/v1/projects/${n.environment}/messages:send`)}`);
    lines.push(`  -H "authorization: Bearer $FCM_ACCESS_TOKEN"`, `  -H 'content-type: application/json'`);
    lines.push(`  --data-binary ${quote(JSON.stringify({ message: n.payload }))}`);
  }
  return lines.join(" \\\n");
}

/** The file `xcrun simctl push` reads: the APNs payload with "Simulator Target Bundle". */
export function apnsFileOf(n) {
  const bundle = (n.device && n.device.app) || bundleOf(n.topic) || "com.example.app";
  return JSON.stringify({ "Simulator Target Bundle": bundle, ...apnsPayloadOf(n) }, null, 2) + "\n";
}

function table(head, rows) {
  return h("div", { class: "scroll" }, h("table", {}, h("thead", {}, h("tr", {}, head.map((t) => h("th", { scope: "col" }, t)))), h("tbody", {}, rows)));
}

export async function render(main, { rest, isCurrent }) {
  const id = rest[0];
  put(main, notice("Loading…"));
  const n = await api(`/emulator/v1/notifications/${encodeURIComponent(id)}`);
  if (!isCurrent()) return;
  const copied = h("div", { role: "status" });
  const dev = n.device;
  const web = n.provider === "webpush";
  const headers = n.headers || {};
  put(main,
    h("p", {}, h("a", { href: "#/notifications" }, "← Notifications")),
    h("h1", {}, "Notification ", h("span", { class: "mono" }, n.id)),
    h("div", { class: "row" },
      // A Web Push message was encrypted for one browser: it cannot be sent again as it stands.
      web ? "" : h("button", { type: "button", id: "copy-curl", onclick: async () => {
        const ok = await copy(curlOf(n), copied);
        if (ok) put(copied, notice("Copied the curl command."));
      } }, "Copy as curl"),
      web ? "" : h("button", { type: "button", id: "download-apns", onclick: () => download(`${n.id}.apns`, apnsFileOf(n)) }, "Download as .apns"),
      h("a", { class: "button", href: `/emulator/v1/notifications/${encodeURIComponent(n.id)}`, target: "_blank", rel: "noopener" }, "JSON")),
    copied,
    h("div", { class: "grid" },
      h("div", { class: "card" }, h("div", { class: "muted" }, "Provider"), h("div", { class: "big" }, n.provider)),
      h("div", { class: "card" }, h("div", { class: "muted" }, "Received"), h("div", {}, dateTime(n.receivedAt))),
      h("div", { class: "card" }, h("div", { class: "muted" }, n.provider === "fcm" ? "Project" : web ? "Push service" : "Environment"), h("div", {}, n.environment || "—")),
      h("div", { class: "card" }, h("div", { class: "muted" }, "Topic"), h("div", {}, n.topic || "—")),
      h("div", { class: "card" }, h("div", { class: "muted" }, "Display"), h("div", {}, displayChip(n.display)), n.display ? h("div", { class: "muted" }, n.display.message) : "")),
    h("h2", {}, "On the device"),
    web ? h("div", { class: "previews" }, chromeToast(n), safariBanner(n)) : h("div", { class: "previews" }, iosBanner(n), androidEntry(n)),
    web ? h("h2", {}, "Encryption") : "",
    web ? table(["", ""], [
      ["Content coding", headers["content-encoding"] || "none (no payload)"],
      ["Decrypted by the browser", n.display && n.display.reason === "decrypt-failed" ? "no: it was dropped" : "yes: the payload below is the plaintext"],
      ["TTL", headers["ttl"] !== undefined ? `${headers["ttl"]} s` : "—"],
      ["Urgency", headers["urgency"] || "normal"],
      ["Topic", headers["topic"] || "—"],
      ["VAPID", "verified by the push service (the JWT is not kept)"],
    ].map(([k, v]) => h("tr", {}, h("td", {}, k), h("td", { class: "mono" }, v)))) : "",
    h("h2", {}, "Device"),
    dev ? h("p", {}, tokenText(dev.token), " ", `${dev.platform} · ${dev.app || "—"} · ${dev.installed ? "installed" : "uninstalled"} · ${dev.appState} · permission ${dev.permission}`, " ",
      h("a", { href: `#/devices/${encodeURIComponent(dev.token)}` }, "open device")) : h("p", { class: "muted" }, "No device record (a fan-out, or the record limit)."),
    h("h2", {}, "Checks"),
    (n.warnings || []).length || (n.lint || []).length
      ? table(["Kind", "Code", "Severity", "Message", "Path"], [
        ...(n.warnings || []).map((w) => h("tr", {}, h("td", {}, "provider"), h("td", {}, "—"), h("td", {}, "warning"), h("td", {}, w), h("td", {}, ""))),
        ...(n.lint || []).map((l) => h("tr", {}, h("td", {}, "SDK lint"), h("td", { class: "mono" }, l.code), h("td", {}, h("span", { class: "chip " + (l.severity === "error" ? "bad" : "warn") }, l.severity)), h("td", {}, l.message), h("td", { class: "mono" }, l.path))),
      ])
      : h("p", { class: "muted" }, "No provider warnings and no SDK lint findings."),
    h("h2", {}, "Tracking calls"),
    (n.tracking || []).length
      ? table(["Time", "Event", "Preset", "Request", "Status", "Latency", "Try", "Outcome"], n.tracking.map((t) => h("tr", {},
        h("td", { class: "mono" }, dateTime(t.at)), h("td", {}, t.event), h("td", {}, t.preset),
        h("td", { class: "mono" }, `${t.method} ${t.url}`), h("td", {}, t.status ? statusChip(t.status) : h("span", { class: "chip bad" }, t.error || "no answer")),
        h("td", {}, `${Number(t.latencyMs).toFixed(1)} ms`), h("td", {}, String(t.attempt)),
        h("td", {}, h("span", { class: "chip " + (t.outcome === "succeeded" ? "ok" : t.outcome === "retrying" ? "warn" : "bad") }, t.outcome)))))
      : h("p", { class: "muted" }, "The SDK made no tracking calls for it (no SDK tracking on the device, or none are due yet)."),
    h("div", { class: "two" },
      h("div", {}, h("h2", {}, "Request headers"), table(["Name", "Value"], Object.entries(n.headers || {}).map(([k, v]) => h("tr", {}, h("td", { class: "mono" }, k), h("td", { class: "mono" }, String(v)))))),
      h("div", {}, h("h2", {}, "Payload"), h("pre", { id: "payload" }, JSON.stringify(n.payload, null, 2)))));
}
