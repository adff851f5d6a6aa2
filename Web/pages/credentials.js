// Credentials: APNs signing keys and FCM service accounts (create, list), and the development CA.
import { h, put, api, notice, fields, download } from "../lib.js";

export async function render(main, { isCurrent }) {
  const keys = h("div", {}, notice("Loading…"));
  const accounts = h("div", {}, notice("Loading…"));
  const out = h("div", { role: "status" });

  const keyForm = h("form", { class: "panel inline", id: "apns-key-form", onsubmit: async (e) => {
    e.preventDefault();
    const f = fields(e.target);
    const body = {};
    if (f.teamId) body.teamId = f.teamId;
    if (f.keyId) body.keyId = f.keyId;
    if (f.environment) body.environment = f.environment;
    try {
      const r = await api("/emulator/v1/apns/keys", { method: "POST", body });
      download(`AuthKey_${r.keyId}.p8`, r.privateKeyPem, "application/x-pem-file");
      put(out, notice(`Made key ${r.keyId} for team ${r.teamId}; its .p8 was downloaded (pushemu keeps only the public half).`));
      load();
    } catch (err) { put(out, notice(err.message, "error")); }
  } },
    h("div", { class: "muted" }, h("strong", {}, "New APNs key"), " (ES256; ids generated when left empty)"),
    h("label", {}, "Team id", h("input", { name: "teamId", size: 12, maxlength: 10, placeholder: "10 characters" })),
    h("label", {}, "Key id", h("input", { name: "keyId", size: 12, maxlength: 10, placeholder: "10 characters" })),
    h("label", {}, "Environment", h("select", { name: "environment" }, h("option", { value: "" }, "both"), h("option", { value: "sandbox" }, "sandbox"), h("option", { value: "production" }, "production"))),
    h("button", { type: "submit", class: "primary" }, "Create and download .p8"));
  const accountForm = h("form", { class: "panel inline", id: "fcm-account-form", onsubmit: async (e) => {
    e.preventDefault();
    const f = fields(e.target);
    try {
      put(out, notice("Making an RSA key (a moment)…"));
      const r = await api("/emulator/v1/fcm/service-accounts", { method: "POST", body: { projectId: f.projectId } });
      download(`${f.projectId}-service-account.json`, JSON.stringify(r, null, 2) + "\n");
      put(out, notice(`Made ${r.client_email}; its key file was downloaded.`));
      load();
    } catch (err) { put(out, notice(err.message, "error")); }
  } },
    h("div", { class: "muted" }, h("strong", {}, "New FCM service account"), " (its token_uri points at this pushemu)"),
    h("label", {}, "Project id", h("input", { name: "projectId", required: true, size: 20, placeholder: "my-project" })),
    h("button", { type: "submit", class: "primary" }, "Create and download key file"));

  put(main, h("h1", {}, "Credentials"), out,
    h("h2", {}, "APNs keys"), keys, keyForm,
    h("h2", {}, "FCM service accounts"), accounts, accountForm,
    h("h2", {}, "Development CA"),
    h("p", {}, "The CA that signs pushemu's development certificate and its proxy tunnels. Trust it in test environments only. ",
      h("a", { class: "button", id: "download-ca", href: "/emulator/v1/ca.pem", download: "pushemu-development-ca.pem" }, "Download the development CA")));

  async function load() {
    const [k, a] = await Promise.all([api("/emulator/v1/apns/keys"), api("/emulator/v1/fcm/service-accounts")]);
    if (!isCurrent()) return;
    const kl = k.keys || [];
    put(keys, kl.length ? h("div", { class: "scroll" }, h("table", { id: "apns-keys" },
      h("thead", {}, h("tr", {}, ["Team id", "Key id", "Environment", "Topics"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, kl.map((e) => h("tr", {}, h("td", { class: "mono" }, e.teamId), h("td", { class: "mono" }, e.keyId), h("td", {}, e.environment || "both"), h("td", {}, (e.topics || []).join(", ") || "all"))))))
      : notice("No APNs keys registered (with --apns-auth lenient, tokens with unknown key ids are accepted)."));
    const al = a.serviceAccounts || [];
    put(accounts, al.length ? h("div", { class: "scroll" }, h("table", { id: "fcm-accounts" },
      h("thead", {}, h("tr", {}, ["Project", "Number", "Client email", "Key id"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, al.map((e) => h("tr", {}, h("td", {}, e.projectId), h("td", { class: "mono" }, e.projectNumber), h("td", { class: "mono" }, e.clientEmail), h("td", { class: "mono" }, e.privateKeyId))))))
      : notice("No service accounts registered."));
  }
  await load();
}
