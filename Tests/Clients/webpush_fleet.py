"""Fleets of web subscriptions driven by pywebpush (PyPI, unchanged): a fleet per browser made
through the admin API, its members' subscriptions read back a page at a time, a push to two
members of each (decrypted by their simulated browsers), an uninstalled member's "gone".
Prints one JSON object.

    webpush_fleet.py BASE_URL VAPID_PEM [SEED]
"""
import json, sys, urllib.parse, urllib.request

from cryptography.hazmat.primitives import serialization
from py_vapid import Vapid02
from pywebpush import WebPushException, webpush
import base64

base, pem = sys.argv[1], sys.argv[2]
seed = int(sys.argv[3]) if len(sys.argv) > 3 else 11
site = Vapid02.from_file(pem)
key = base64.urlsafe_b64encode(site.public_key.public_bytes(serialization.Encoding.X962,
                                                           serialization.PublicFormat.UncompressedPoint)).rstrip(b"=").decode()


def admin(method, path, body=None):
    req = urllib.request.Request(base + path, method=method, data=json.dumps(body).encode() if body is not None else None,
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def send(sub, data, headers):
    try:
        r = webpush(sub, data=data, vapid_private_key=site, vapid_claims={"sub": "mailto:ops@shop.example"}, ttl=3600,
                    headers=headers)
        return r.status_code
    except WebPushException as e:
        return e.response.status_code


def token(endpoint):
    tail = endpoint.rsplit("/", 1)[1]
    return tail.split("token=", 1)[1] if "token=" in tail else tail


out = {"fleets": {}}
for browser in ["chrome", "firefox", "safari", "edge"]:
    status, fleet = admin("POST", "/emulator/v1/fleets", {"platform": "web", "browser": browser, "app": "https://shop.example",
                                                          "count": 10000000, "applicationServerKey": key, "seed": seed})
    one = {"status": status, "fleet": fleet}
    _, page = admin("GET", f"/emulator/v1/fleets/{fleet['id']}/subscriptions?offset=9999998&limit=2&endpoints=local")
    _, tokens = admin("GET", f"/emulator/v1/fleets/{fleet['id']}/tokens?offset=9999998&limit=2")
    one["page"] = page
    one["tokens"] = tokens["tokens"]
    headers = {"X-WNS-Cache-Policy": "cache"} if browser == "edge" else {}
    one["pushes"] = []
    for i, sub in enumerate(page["subscriptions"]):
        one["pushes"].append(send(sub, json.dumps({"title": f"Fleet {browser} {i}", "body": "for member " + str(i)}), headers))
    first = token(page["subscriptions"][0]["endpoint"])
    _, one["latest"] = admin("GET", "/emulator/v1/notifications/latest?wait=5&token=" + urllib.parse.quote(first))
    _, one["device"] = admin("GET", "/emulator/v1/devices/" + urllib.parse.quote(first))
    admin("DELETE", "/emulator/v1/devices/" + urllib.parse.quote(first))
    one["afterUninstall"] = send(page["subscriptions"][0], "again", headers)
    # A token its fleet never issued: a forged tail.
    forged = dict(page["subscriptions"][1])
    forged["endpoint"] = forged["endpoint"][:-3] + ("AAA" if not forged["endpoint"].endswith("AAA") else "BBB")
    one["forged"] = send(forged, "x", headers)
    out["fleets"][browser] = one
status, out["notWeb"] = admin("GET", "/emulator/v1/fleets/nope/subscriptions")
out["notWebStatus"] = status
status, body = admin("POST", "/emulator/v1/fleets", {"platform": "web", "browser": "opera", "app": "https://x", "count": 1,
                                                     "applicationServerKey": key})
out["badBrowser"] = [status, body]
status, body = admin("POST", "/emulator/v1/fleets", {"platform": "web", "app": "https://x", "count": 1})
out["noKey"] = [status, body]
print(json.dumps(out))
