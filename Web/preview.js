// How a device would show a notification: the content an iOS lock-screen banner and an
// Android notification-shade entry take from either provider's payload, and those two views.
import { h, relative } from "./lib.js";

const str = (v) => (typeof v === "string" ? v : v === undefined || v === null ? "" : String(v));
const parseJSON = (v) => { if (typeof v !== "string") return v; try { return JSON.parse(v); } catch { return null; } };

/** The bundle id an apns-topic names (its .voip, .complication... suffix removed). */
export function bundleOf(topic) {
  for (const s of [".voip", ".complication", ".pushkit.fileprovider", ".push-type.liveactivity", ".location-query"]) {
    if (topic && topic.endsWith(s)) return topic.slice(0, -s.length);
  }
  return topic || "";
}

/** The APNs payload a notification stands for: APNs's own, or what FCM sends an iOS app. */
export function apnsPayloadOf(n) {
  const p = n.payload || {};
  if (n.provider === "apns") return p;
  const apns = ((p.apns || {}).payload) || {};
  const out = { ...(p.data || {}), ...apns };
  const aps = { ...(apns.aps || {}) };
  const nn = p.notification || {};
  if (!aps.alert && (nn.title || nn.body)) aps.alert = { title: nn.title, body: nn.body };
  out.aps = aps;
  return out;
}

/** What the iOS banner shows. */
export function iosContent(n) {
  const p = apnsPayloadOf(n);
  const aps = p.aps || {};
  let alert = aps.alert;
  if (typeof alert === "string") alert = { body: alert };
  alert = alert || {};
  const fcmImage = n.provider === "fcm" ? (((n.payload || {}).apns || {}).fcm_options || {}).image || ((n.payload || {}).notification || {}).image : "";
  const image = fcmImage || str(p["attachment-url"]) || str(p.att && (p.att.id || p.att.url)) || str(((p.moengage || {})["media-attachment"]) || "")
    || str((p.ab && p.ab.att && (p.ab.att.url || p.ab.att.aof)) || "") || str(p.mediaUrl) || str(p.image);
  return {
    title: str(alert.title || (alert["title-loc-key"] ? `[${alert["title-loc-key"]}]` : "")),
    subtitle: str(alert.subtitle || (alert["subtitle-loc-key"] ? `[${alert["subtitle-loc-key"]}]` : "")),
    body: str(alert.body || (alert["loc-key"] ? `[${alert["loc-key"]}]` : "")),
    badge: typeof aps.badge === "number" ? aps.badge : null,
    sound: aps.sound ? (typeof aps.sound === "string" ? aps.sound : str(aps.sound.name)) : "",
    image,
    silent: !aps.alert && (aps["content-available"] === 1),
  };
}

/** What the Android entry shows: the FCM notification, else the SDK's own data keys. */
export function androidContent(n) {
  const p = n.payload || {};
  if (n.provider === "apns") {
    const c = iosContent(n);
    return { title: c.title, body: [c.subtitle, c.body].filter(Boolean).join(" — "), color: "", image: c.image, actions: [], channel: "", translated: true };
  }
  const an = ((p.android || {}).notification) || {};
  const nn = p.notification || {};
  const d = p.data || {};
  const actions = [];
  for (let i = 0; i < 3; i++) if (d[`ab_a${i}_t`]) actions.push(str(d[`ab_a${i}_t`]));
  const moeActions = parseJSON(d.gcm_actions);
  if (Array.isArray(moeActions)) for (const a of moeActions.slice(0, 3)) actions.push(str(a.action_title || a.actionTitle || a.title));
  const title = an.title || nn.title || d.header || d.t || d.gcm_title || d.title_text || "";
  const body = an.body || nn.body || (d.pw_msg ? d.title : "") || d.a || d.gcm_alert || d.message || "";
  return {
    title: str(title), body: str(body),
    color: str(an.color || d.ab_ac || ""),
    image: str(an.image || nn.image || d.b || d.ab_iu || d.gcm_image_url || ""),
    actions: actions.filter(Boolean),
    channel: str(an.channel_id || d.ab_nc || d.pw_channel || d.moe_channel_id || ""),
    translated: false,
  };
}

function appName(n) {
  const app = (n.device && n.device.app) || bundleOf(n.topic) || "App";
  const last = app.split(".").pop() || app;
  return last.charAt(0).toUpperCase() + last.slice(1);
}

function thumb(url, cls = "thumb") {
  let host = "";
  try { host = new URL(url).hostname; } catch {}
  return h("div", { class: cls, title: `attachment: ${url} (not fetched: the dashboard loads nothing from other sites)`, role: "img", "aria-label": `attachment ${url}` }, host);
}

function notShownNote(n) {
  const d = n.display;
  if (!d || d.outcome === "shown") return "";
  return h("div", { class: "caption" }, d.outcome === "quiet" ? `Delivered quietly (${d.reason}): to Notification Center only` : `Not shown on the device: ${d.reason}`);
}

/** The iOS lock-screen banner. */
export function iosBanner(n, now = Date.now()) {
  const c = iosContent(n);
  const name = appName(n);
  const native = n.provider === "apns" || (n.device && n.device.platform === "ios");
  return h("figure", { class: "phone ios" + (n.display && n.display.outcome === "not-shown" && native ? " not-shown" : ""), id: "preview-ios", "aria-label": "iOS lock screen preview" },
    h("div", { class: "caption" }, native ? "iOS lock screen" : "iOS lock screen (the same message sent to an iPhone through FCM)"),
    native ? notShownNote(n) : "",
    c.silent && !c.title && !c.body ? h("div", { class: "caption" }, "A background push: nothing is shown.") :
      h("div", { class: "ios-banner" },
        h("div", { class: "app-icon", "aria-hidden": "true" }, name.charAt(0), c.badge !== null && c.badge > 0 ? h("span", { class: "badge" }, String(c.badge)) : ""),
        h("div", { class: "app-name" }, name),
        h("div", { class: "when" }, relative(n.receivedAt, now)),
        h("div", { class: c.image ? "text beside" : "text" },
          c.title ? h("div", { class: "title" }, c.title) : "",
          c.subtitle ? h("div", { class: "subtitle" }, c.subtitle) : "",
          c.body ? h("div", { class: "body" }, c.body) : ""),
        c.image ? thumb(c.image) : ""),
    h("figcaption", { class: "caption" }, [c.sound ? `sound: ${c.sound}` : "no sound", c.badge !== null ? `badge: ${c.badge}` : ""].filter(Boolean).join(" · ")));
}

/** The Android notification-shade entry. */
export function androidEntry(n, now = Date.now()) {
  const c = androidContent(n);
  const name = appName(n);
  const native = n.provider === "fcm" && !(n.device && n.device.platform === "ios");
  const longText = c.body.length > 48 && !c.image;
  return h("figure", { class: "phone android" + (n.display && n.display.outcome === "not-shown" && native ? " not-shown" : ""), id: "preview-android", "aria-label": "Android notification shade preview" },
    h("div", { class: "caption" }, native ? "Android notification shade" : "Android notification shade (the same alert sent to an Android app)"),
    native ? notShownNote(n) : "",
    !c.title && !c.body ? h("div", { class: "caption" }, "A data message with nothing the SDK shows: no notification.") :
      h("div", { class: "android-entry" },
        h("div", { class: "head" },
          h("span", { class: "small-icon", style: { background: /^#[0-9a-fA-F]{3,8}$/.test(c.color) ? c.color : "#5d6677" }, title: c.color ? `color ${c.color}` : "default color" }),
          h("span", {}, name), h("span", {}, "·"), h("span", {}, relative(n.receivedAt, now)), c.channel ? h("span", {}, `· ${c.channel}`) : ""),
        h("div", { class: "body-row" },
          h("div", {}, c.title ? h("div", { class: "title" }, c.title) : "", c.body ? h("div", { class: "body" }, c.body) : "")),
        c.image ? thumb(c.image, "thumb big-picture") : "",
        c.actions.length ? h("div", { class: "actions" }, c.actions.map((a) => h("span", {}, a.toUpperCase()))) : ""),
    h("figcaption", { class: "caption" }, c.image ? "big picture style (expanded)" : longText ? "big text style (expanded)" : "default style"));
}

/** What a browser's notification shows: a Web Push payload as a service worker written the
 * common way reads it (top-level title/body/icon/image/actions, a `notification` object, or
 * Pushwoosh's header/i). */
export function webContent(n) {
  const p = n.payload && typeof n.payload === "object" ? n.payload : {};
  const nn = p.notification && typeof p.notification === "object" ? p.notification : {};
  const actions = Array.isArray(p.actions || nn.actions) ? (p.actions || nn.actions).slice(0, 2).map((a) => str(a && a.title)) : [];
  return {
    title: str(p.title || nn.title || p.header || ""),
    body: str(p.body || nn.body || p.alert || ""),
    icon: str(p.icon || nn.icon || p.i || ""),
    image: str(p.image || nn.image || ""),
    actions: actions.filter(Boolean),
    tag: str(p.tag || nn.tag || ""),
    renotify: (p.renotify || nn.renotify) === true,
    silent: (p.silent || nn.silent) === true,
    requireInteraction: (p.requireInteraction || nn.requireInteraction) === true,
  };
}

/** What the browser does with the options beyond the text (MDN's compatibility table). */
function webOptions(c, safari) {
  const notes = [];
  if (c.tag) notes.push(`replaces an earlier notification tagged "${c.tag}"` + (!safari && c.renotify ? ", and alerts again" : ", silently"));
  if (c.silent) notes.push("no sound or vibration");
  if (c.requireInteraction && !safari) notes.push("stays until clicked or dismissed");
  if (safari && (c.image || c.actions.length)) notes.push("Safari shows no image and no action buttons");
  return notes.length ? h("div", { class: "caption" }, notes.join("; ")) : "";
}

function siteOf(n) {
  const app = (n.device && n.device.app) || "";
  try { return new URL(app).host; } catch { return app || "the site"; }
}

function webFigure(n, id, cls, caption, browser, now) {
  const c = webContent(n);
  const safari = cls === "safari";
  const shown = !n.display || n.display.outcome === "shown";
  return h("figure", { class: "desktop " + cls + (shown ? "" : " not-shown"), id, "aria-label": `${caption} preview` },
    h("div", { class: "caption" }, caption),
    notShownNote(n),
    !c.title ? h("div", { class: "caption" }, "No title: the service worker shows nothing.") :
      h("div", { class: "web-toast" },
        h("div", { class: "head" }, h("span", { class: "small-icon", "aria-hidden": "true" }), h("span", {}, browser), h("span", {}, "·"), h("span", {}, siteOf(n)), h("span", {}, relative(n.receivedAt, now))),
        h("div", { class: c.icon ? "text beside" : "text" }, h("div", { class: "title" }, c.title), c.body ? h("div", { class: "body" }, c.body) : ""),
        c.icon ? thumb(c.icon) : "",
        c.image && !safari ? thumb(c.image, "thumb big-picture") : "",
        c.actions.length && !safari ? h("div", { class: "actions" }, c.actions.map((a) => h("span", {}, a))) : ""),
    c.title ? webOptions(c, safari) : "");
}

/** Chrome's notification on Windows (also Edge's). */
export function chromeToast(n, now = Date.now()) { return webFigure(n, "preview-chrome", "chrome", "Chrome on Windows", "Google Chrome", now); }

/** Safari's notification on macOS. */
export function safariBanner(n, now = Date.now()) { return webFigure(n, "preview-safari", "safari", "Safari on macOS", "Safari", now); }
