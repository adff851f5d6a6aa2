"""pywebpush (PyPI, unchanged) against pushemu's Web Push services: one subscription per browser
made through the admin API, a push to each, then the errors senders hit. Prints one JSON object.

    webpush_send.py BASE_URL [VAPID_PEM]   (the site's key: a file from `pushemu credentials vapid --out`)
"""
import base64, json, sys, time, urllib.request

from cryptography.hazmat.primitives import serialization
from py_vapid import Vapid02
from pywebpush import WebPushException, webpush

base = sys.argv[1]


def admin(method, path, body=None):
    req = urllib.request.Request(base + path, method=method, data=json.dumps(body).encode() if body is not None else None,
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)


def key(v):
    raw = v.public_key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def send(sub, data, vapid, claims=None, **kw):
    """(status, headers, body, exception type) of one pywebpush call."""
    try:
        r = webpush(sub, data=data, vapid_private_key=vapid, vapid_claims=dict(claims or {"sub": "mailto:ops@shop.example"}), **kw)
        return {"status": r.status_code, "headers": dict(r.headers), "body": r.text}
    except WebPushException as e:
        r = e.response
        return {"status": r.status_code, "headers": dict(r.headers), "body": r.text, "exception": type(e).__name__,
                "message": str(e)}


if len(sys.argv) > 2:
    site = Vapid02.from_file(sys.argv[2])
else:
    site = Vapid02()
    site.generate_keys()
other = Vapid02()
other.generate_keys()
sink = sys.argv[3] if len(sys.argv) > 3 else None
out = {"sent": {}, "errors": {}}
subs = {}
for browser in ["chrome", "firefox", "safari", "edge"]:
    body = {"platform": "web", "browser": browser, "app": "https://shop.example", "applicationServerKey": key(site), "labels": ["web"]}
    if sink and browser == "safari":
        # The site's own tracking, by webhook: a receive call, and an open (the user always taps).
        body.update({"tracking": {"preset": "webhook", "url": sink}, "behavior": {"openRate": 1.0}})
    dev = admin("POST", "/emulator/v1/devices", body)
    subs[browser] = dev
    extra = {"headers": {"X-WNS-Cache-Policy": "cache"}} if browser == "edge" else {}
    payload = json.dumps({"title": "Sale " + browser, "body": "50% off"})
    out["sent"][browser] = dict(send(dev["subscription"], payload, site, ttl=60, **extra), token=dev["token"],
                                subscription=dev["subscription"], payload=payload)

# The legacy aesgcm coding (older senders), to Firefox.
out["aesgcm"] = send(subs["firefox"]["subscription"], json.dumps({"title": "Legacy"}), site, ttl=30, content_encoding="aesgcm")
# Another site's key than the subscription's.
out["errors"]["chrome-other-key"] = send(subs["chrome"]["subscription"], "x", other, ttl=60)
# exp more than 24 hours ahead.
out["errors"]["firefox-exp"] = send(subs["firefox"]["subscription"], "x", site, ttl=60,
                                    claims={"sub": "mailto:ops@shop.example", "exp": int(time.time()) + 90000})
# A subject Apple refuses (webpush.md §3.2).
out["errors"]["safari-localhost"] = send(subs["safari"]["subscription"], "x", site, ttl=60, claims={"sub": "mailto:me@localhost"})
# pywebpush's default TTL 0 to WNS without X-WNS-Cache-Policy: no-cache.
out["errors"]["edge-ttl0"] = send(subs["edge"]["subscription"], "x", site)
# A payload past 4,096 bytes once encrypted.
out["errors"]["chrome-large"] = send(subs["chrome"]["subscription"], "y" * 4000, site, ttl=60)
# The browser unsubscribed.
admin("DELETE", "/emulator/v1/devices/" + subs["chrome"]["token"])
out["errors"]["chrome-gone"] = send(subs["chrome"]["subscription"], "x", site, ttl=60)
# An offline browser: TTL 0 is dropped; a newer message with the same Topic replaces the held one.
dev = admin("POST", "/emulator/v1/devices", {"platform": "web", "browser": "firefox", "app": "https://shop.example",
                                             "applicationServerKey": key(site)})
admin("POST", "/emulator/v1/devices/%s:offline" % dev["token"])
offline = [send(dev["subscription"], json.dumps({"title": t}), site, ttl=ttl, headers=h)["status"]
           for t, ttl, h in [("now or never", 0, None), ("v1", 600, {"Topic": "price"}), ("v2", 600, {"Topic": "price"})]]
admin("POST", "/emulator/v1/devices/%s:online" % dev["token"])
after = admin("GET", "/emulator/v1/devices/" + dev["token"])
out["offline"] = {"statuses": offline, "received": after["received"], "dropped": after["dropped"], "collapsed": after["collapsed"]}
# A fault rule answers in the service's format.
admin("POST", "/emulator/v1/faults", {"match": {"provider": "webpush", "first": 1}, "effect": {"status": 429, "retryAfter": 30}})
out["fault"] = send(dev["subscription"], "x", site, ttl=60)
print(json.dumps(out))
