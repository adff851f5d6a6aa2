"""Two pushemu nodes of one cluster (a real redis-server between them), driven over HTTP: what
one node is told, the other acts on. Prints one JSON object.

    cluster_check.py NODE_A_URL NODE_B_URL APNS_JWT VAPID_PEM [SAMPLES]

- /emulator/v1/cluster on A names both nodes, healthy;
- SAMPLES times: a device made on A is pushed to on B (200), uninstalled on A, and B answers
  410 for it: the time from A's answer to B's seeing it, in ms (polled every 2 ms);
- a fault rule made on A is listed on B and answers B's push;
- a web subscription made on A takes pywebpush's message on B (201, decrypted there).
"""
import json, os, subprocess, sys, time, urllib.request

a, b, jwt, pem = sys.argv[1:5]
samples = int(sys.argv[5]) if len(sys.argv) > 5 else 20


def call(base, method, path, body=None):
    req = urllib.request.Request(base + path, method=method, data=json.dumps(body).encode() if body is not None else None,
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def push(base, token, extra=()):
    out = subprocess.run(["curl", "-s", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}",
                          "-H", "authorization: bearer " + jwt, "-H", "apns-topic: com.example.cluster", *extra,
                          "-d", '{"aps":{"alert":"hi"}}', base + "/3/device/" + token], capture_output=True, text=True, timeout=10)
    return int(out.stdout or 0)


def wait_for(pred, limit=5.0):
    start = time.monotonic()
    while time.monotonic() - start < limit:
        if pred():
            return (time.monotonic() - start) * 1000
        time.sleep(0.002)
    return None


out = {}
_, out["cluster"] = call(a, "GET", "/emulator/v1/cluster")
lags, first, gone = [], [], []
for i in range(samples):
    token = os.urandom(32).hex()
    status, _ = call(a, "POST", "/emulator/v1/devices", {"platform": "ios", "app": "com.example.cluster", "token": token})
    assert status == 201, status
    wait_for(lambda: call(b, "GET", "/emulator/v1/devices/" + token)[0] == 200)
    first.append(push(b, token))
    status, _ = call(a, "DELETE", "/emulator/v1/devices/" + token)
    assert status == 200, status
    lag = wait_for(lambda: call(b, "GET", "/emulator/v1/devices/" + token)[1].get("installed") is False)
    lags.append(lag)
    gone.append(push(b, token))
out["firstPush"] = first
out["afterUninstall"] = gone
out["uninstallLagMs"] = lags

token = os.urandom(32).hex()
status, made = call(a, "POST", "/emulator/v1/faults", {"match": {"provider": "apns", "token": token},
                                                       "effect": {"status": 503, "reason": "ServiceUnavailable"}})
out["ruleMade"] = status
rule = (made.get("faults") or [{}])[0]
wait_for(lambda: any(r.get("id") == rule.get("id") for r in call(b, "GET", "/emulator/v1/faults")[1].get("faults", [])))
out["faulted"] = push(b, token)

# A scenario started on A runs its steps on B over the same interval: its first step (from 0 s,
# for 30 s) answers B's pushes to its token 500; its second (from 10 min) is not active yet.
token = os.urandom(32).hex()
status, scenario = call(a, "POST", "/emulator/v1/scenarios", {"name": "outage", "steps": [
    {"at": "0s", "for": "30s", "match": {"provider": "apns", "token": token}, "effect": {"status": 500, "reason": "InternalServerError"}},
    {"at": "10m", "match": {"provider": "apns", "token": token}, "effect": {"status": 503, "reason": "ServiceUnavailable"}}]})
out["scenarioMade"] = status
wait_for(lambda: len(call(b, "GET", "/emulator/v1/scenarios")[1].get("scenarios", [])) == 1)
out["scenarioStep"] = push(b, token)

from py_vapid import Vapid02
from pywebpush import webpush, WebPushException
from cryptography.hazmat.primitives import serialization
import base64
site = Vapid02.from_file(pem)
key = base64.urlsafe_b64encode(site.public_key.public_bytes(serialization.Encoding.X962,
                                                           serialization.PublicFormat.UncompressedPoint)).rstrip(b"=").decode()
status, dev = call(a, "POST", "/emulator/v1/devices", {"platform": "web", "browser": "firefox", "app": "https://shop.example",
                                                      "applicationServerKey": key, "localEndpoint": True})
sub = dev["subscription"]
sub["endpoint"] = b + "/" + sub["endpoint"].split("/", 3)[3]
wait_for(lambda: call(b, "GET", "/emulator/v1/devices/" + dev["token"])[0] == 200)
try:
    r = webpush(sub, data=json.dumps({"title": "Across the cluster"}), vapid_private_key=site,
                vapid_claims={"sub": "mailto:ops@shop.example"}, ttl=60)
    out["webpush"] = r.status_code
except WebPushException as e:
    out["webpush"] = e.response.status_code
_, latest = call(b, "GET", "/emulator/v1/notifications/latest?wait=5&token=" + dev["token"])
out["webpushTitle"] = (latest.get("payload") or {}).get("title")
print(json.dumps(out))
