// Faults: the rules with their seen/fired counters, new rules from templates (or as JSON),
// delete; and the scenarios' progress.
import { h, put, api, notice, dateTime, fields } from "../lib.js";

/** The rule a template form describes (the admin API's {"match","effect"}). */
export function ruleOf(template, f) {
  const provider = f.provider || "apns";
  const match = { provider };
  if (f.token) match.token = f.token;
  if (f.first) match.first = Number(f.first);
  if (f.percent) match.percent = Number(f.percent);
  switch (template) {
    case "unavailable": {
      const retryAfter = Number(f.retryAfter || 2);
      return { match, effect: provider === "fcm" ? { errorCode: "UNAVAILABLE", retryAfter } : { status: 503, reason: "ServiceUnavailable", retryAfter } };
    }
    case "unregistered":
      return { match, effect: provider === "fcm" ? { errorCode: "UNREGISTERED" } : { status: 410, reason: "Unregistered" } };
    case "latency": {
      const min = Number(f.min || 0), max = Number(f.max || f.min || 0);
      return { match, effect: { delayMs: max > min ? { dist: "uniform", min, max } : min } };
    }
    default:
      throw new Error(`unknown template ${template}`);
  }
}

export async function render(main, { isCurrent }) {
  const rules = h("div", {}, notice("Loading…"));
  const scenarios = h("div", {});
  const out = h("div", { role: "status" });

  async function add(rule) {
    try {
      const r = await api("/emulator/v1/faults", { method: "POST", body: rule });
      put(out, notice(`Added ${r.id || "the rules"}.`));
      await load();
    } catch (e) { put(out, notice(e.message, "error")); }
  }
  const provider = () => h("label", {}, "Provider", h("select", { name: "provider" }, h("option", { value: "apns" }, "APNs"), h("option", { value: "fcm" }, "FCM")));
  const template = (id, title, hint, ...inputs) => h("form", { class: "panel inline", id: `template-${id}`, onsubmit: (e) => {
    e.preventDefault();
    try { add(ruleOf(id, fields(e.target))); } catch (err) { put(out, notice(err.message, "error")); }
  } }, h("div", { class: "muted" }, h("strong", {}, title), " ", hint), provider(), ...inputs, h("button", { type: "submit", class: "primary" }, "Add rule"));

  put(main, h("h1", {}, "Faults"),
    h("p", { class: "muted" }, "Rules make pushemu answer as APNs and FCM do on a bad day; each applies to every matching push and counts what it saw and fired."),
    h("h2", {}, "Rules"), rules, out,
    h("h2", {}, "Add a rule"),
    h("div", { class: "two" },
      template("unavailable", "503 with Retry-After", "(APNs ServiceUnavailable, FCM UNAVAILABLE)",
        h("label", {}, "Retry-After (s)", h("input", { name: "retryAfter", type: "number", min: 0, max: 31536000, value: 2, size: 6 })),
        h("label", {}, "First N pushes", h("input", { name: "first", type: "number", min: 1, placeholder: "all", size: 6 })),
        h("label", {}, "Percent", h("input", { name: "percent", type: "number", min: 0, max: 100, placeholder: "100", size: 5 }))),
      template("unregistered", "Unregistered for a token", "(APNs 410 Unregistered, FCM 404 UNREGISTERED)",
        h("label", {}, "Device token", h("input", { name: "token", required: true, size: 40 }))),
      template("latency", "Latency", "(answers wait on the loop's timers; a range is uniform)",
        h("label", {}, "Min ms", h("input", { name: "min", type: "number", min: 0, max: 3600000, value: 200, size: 7 })),
        h("label", {}, "Max ms", h("input", { name: "max", type: "number", min: 0, max: 3600000, placeholder: "= min", size: 7 }))),
      h("form", { class: "panel", id: "template-json", onsubmit: (e) => {
        e.preventDefault();
        let rule;
        try { rule = JSON.parse(e.target.rule.value); } catch (err) { return put(out, notice(`Not JSON: ${err.message}`, "error")); }
        add(rule);
      } }, h("label", {}, "Any rule, as JSON (see docs/faults.md)", h("textarea", { name: "rule", rows: 4, cols: 48, spellcheck: "false" }, '{"match":{"provider":"apns","every":10},"effect":{"goaway":"Shutdown"}}')),
      h("div", {}, h("button", { type: "submit" }, "Add rule")))),
    h("h2", {}, "Scenarios"), scenarios);

  async function load() {
    const [r, sc] = await Promise.all([api("/emulator/v1/faults"), api("/emulator/v1/scenarios")]);
    if (!isCurrent()) return;
    const list = r.faults || [];
    put(rules, list.length ? h("div", { class: "scroll" }, h("table", { id: "faults" },
      h("thead", {}, h("tr", {}, ["Rule", "Match", "Effect", "Seen", "Fired", "Created", ""].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, list.map((f) => h("tr", { dataset: { id: f.id } },
        h("td", { class: "mono" }, f.id), h("td", { class: "mono" }, JSON.stringify(f.match)), h("td", { class: "mono" }, JSON.stringify(f.effect)),
        h("td", { class: "seen" }, String(f.seen)), h("td", { class: "fired" }, String(f.fired)), h("td", {}, dateTime(f.createdAt)),
        h("td", {}, h("button", { type: "button", class: "danger", "aria-label": `Delete ${f.id}`, onclick: async () => {
          await api(`/emulator/v1/faults/${encodeURIComponent(f.id)}`, { method: "DELETE" });
          load();
        } }, "Delete")))))),
    h("div", { class: "row" }, h("button", { type: "button", class: "danger", onclick: async () => { if (confirm("Delete every rule?")) { await api("/emulator/v1/faults", { method: "DELETE" }); load(); } } }, "Delete all")))
      : notice("No rules: every push gets the provider's own answer."));
    const scs = sc.scenarios || [];
    put(scenarios, scs.length ? h("pre", {}, JSON.stringify(scs, null, 2)) : notice("No scenarios (POST /emulator/v1/scenarios or --scenario FILE)."));
  }
  await load();
  const timer = setInterval(() => load().catch(() => {}), 2000);
  return () => clearInterval(timer);
}
