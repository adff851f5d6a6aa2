#!/usr/bin/env python3
"""Parallel CI jobs sharing one pushemu, each in its own scope: APNs jobs with their own key
(team) through the real aioapns, FCM jobs with their own project through the real
firebase-admin. Every job at once: makes a rule in its scope (its first push refused),
sends 20 pushes marked with its name (the APNs jobs to the same device token), then reads
back through `scope=` only its own: the notifications, the event stream, the campaign totals
and its rule. Then one job resets its scope: its notifications and rule are gone, the others'
are all there.

usage: SSL_CERT_FILE=ca.pem scoped_jobs.py HTTP_BASE HTTPS_PORT JOBS_JSON [--cluster]
(--cluster: the devices check is left out: a cluster node lists the devices it holds)
JOBS_JSON: [{"name", "scope", "apns": {"key", "keyId", "team"}} | {"name", "scope", "fcm": {"credentials", "project"}}]
Prints one JSON object: {"jobs": {NAME: {...}}, "afterReset": {...}}; exits 1 on a failed check.
"""
import asyncio, json, sys, threading, urllib.parse, urllib.request, uuid

import aioapns.connection
from aioapns import APNs, NotificationRequest, PushType
import firebase_admin
from firebase_admin import credentials, messaging, exceptions

base, https_port, jobs = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
cluster = "--cluster" in sys.argv[4:]
aioapns.connection.APNsDevelopmentClientProtocol.APNS_SERVER = "localhost"
aioapns.connection.APNsDevelopmentClientProtocol.APNS_PORT = https_port
messaging._MessagingService.FCM_URL = base + "/v1/projects/{0}/messages:send"
messaging._MessagingService.IID_URL = base
PUSHES = 20
SHARED_TOKEN = "ab" * 32
failures = []
results = {}


def admin(method, path, body=None):
    req = urllib.request.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def check(job, what, ok, detail):
    if not ok:
        failures.append(f"{job}: {what}: {detail}")


def scoped(path, scope):
    return path + ("&" if "?" in path else "?") + "scope=" + urllib.parse.quote(scope)


def events(scope, into, ready, stop):
    """The event stream in the job's scope, read until `stop` (the accepted and rejected ones)."""
    req = urllib.request.Request(base + scoped("/emulator/v1/events?types=accepted,rejected", scope))
    with urllib.request.urlopen(req, timeout=60) as r:
        ready.set()
        for raw in r:
            line = raw.decode()
            if line.startswith("data: "):
                into.append(json.loads(line[6:]))
            if stop.is_set() and len(into) >= PUSHES:
                return


def send_apns(job):
    a = job["apns"]
    async def main():
        client = APNs(key=open(a["key"]).read(), key_id=a["keyId"], team_id=a["team"], topic="com.example.ci", use_sandbox=True)
        async def one(i):
            r = await client.send_notification(NotificationRequest(
                device_token=SHARED_TOKEN, message={"aps": {"alert": f"{job['name']} {i}"}, "job": job["name"]},
                notification_id=str(uuid.uuid4()), push_type=PushType.ALERT))
            return r.status
        # One at a time: the scoped rule takes the first.
        return [await one(i) for i in range(PUSHES)]
    return asyncio.run(asyncio.wait_for(main(), timeout=60))


def send_fcm(job):
    f = job["fcm"]
    app = firebase_admin.initialize_app(credentials.Certificate(f["credentials"]), name=job["name"])
    token = f"{job['name']}fid000000:APA91b" + "T" * 140
    codes = []
    for i in range(PUSHES):
        try:
            messaging.send(messaging.Message(token=token, notification=messaging.Notification(title=f"{job['name']} {i}"),
                                             data={"job": job["name"]}), app=app)
            codes.append("200")
        except exceptions.FirebaseError as e:
            codes.append(type(e).__name__)
    return codes


def run(job):
    name, scope = job["name"], job["scope"]
    out = results.setdefault(name, {})
    seen, ready, stop = [], threading.Event(), threading.Event()
    reader = threading.Thread(target=events, args=(scope, seen, ready, stop), daemon=True)
    reader.start()
    ready.wait(10)
    # A refusal neither client retries (firebase-admin retries 500 and 503).
    effect = {"status": 400, "reason": "BadDeviceToken"} if "apns" in job else {"status": 400, "errorCode": "INVALID_ARGUMENT"}
    status, rule = admin("POST", scoped("/emulator/v1/faults", scope), {"match": {"first": 1}, "effect": effect})
    check(name, "scoped rule", status == 201 and rule["match"].get("scope") == scope, rule)
    codes = send_apns(job) if "apns" in job else send_fcm(job)
    out["codes"] = codes
    check(name, "the scoped rule took its own first push only", codes[0] != "200" and codes[0] != 200, codes[:3])
    check(name, "the rest accepted", all(c in (200, "200") for c in codes[1:]), codes)
    _, page = admin("GET", scoped("/emulator/v1/notifications?limit=1000", scope))
    mine = page["notifications"]
    out["notifications"] = len(mine)
    check(name, "its notifications", len(mine) == PUSHES - 1, len(mine))
    check(name, "only its own", all(json.dumps(n["payload"]).count(name) >= 1 for n in mine), [n["payload"] for n in mine[:2]])
    _, counts = admin("GET", scoped("/emulator/v1/campaigns", scope))
    out["sent"] = counts["totals"]["sent"]
    check(name, "its campaign totals", counts["totals"]["sent"] == PUSHES and counts["totals"]["accepted"] == PUSHES - 1, counts["totals"])
    _, devices = admin("GET", scoped("/emulator/v1/devices?limit=1000", scope))
    mine_tokens = {n["token"] for n in mine}
    listed = {d["token"] for d in devices["devices"]}
    out["devices"] = len(listed)
    check(name, "its devices", cluster or listed == mine_tokens, (listed, mine_tokens))
    _, rules = admin("GET", scoped("/emulator/v1/faults", scope))
    check(name, "its rule only", len(rules["faults"]) == 1 and rules["faults"][0]["fired"] == 1, rules)
    stop.set()
    reader.join(10)
    out["events"] = len(seen)
    check(name, "its events", len(seen) == PUSHES, len(seen))
    check(name, "only its events", all(e.get("team") == scope[5:] if scope.startswith("team:") else e.get("environment") == scope[8:] for e in seen),
          seen[:2])


def guarded(job):
    try:
        run(job)
    except Exception as e:  # a job that raised failed
        failures.append(f"{job['name']}: {type(e).__name__}: {e}")


threads = [threading.Thread(target=guarded, args=(j,)) for j in jobs]
for t in threads:
    t.start()
for t in threads:
    t.join(120)

# The first job resets its scope: its notifications and rule are gone; the others keep theirs.
first = jobs[0]
status, reset = admin("POST", scoped("/emulator/v1/reset", first["scope"]))
check(first["name"], "reset", status == 200 and reset["notifications"] == PUSHES - 1 and reset["faults"] == 1, reset)
after = {}
for j in jobs:
    _, page = admin("GET", scoped("/emulator/v1/notifications?limit=1000", j["scope"]))
    _, rules = admin("GET", scoped("/emulator/v1/faults", j["scope"]))
    _, counts = admin("GET", scoped("/emulator/v1/campaigns", j["scope"]))
    after[j["name"]] = {"notifications": len(page["notifications"]), "faults": len(rules["faults"]), "sent": counts["totals"]["sent"]}
    want = (0, 0, 0) if j is first else (PUSHES - 1, 1, PUSHES)
    check(j["name"], "after the first job's reset", tuple(after[j["name"]].values()) == want, after[j["name"]])
status, bad = admin("GET", "/emulator/v1/notifications?scope=job:1")
check("-", "an unknown scope form is a 400", status == 400, bad)
print(json.dumps({"jobs": results, "afterReset": after, "failures": failures}))
sys.exit(1 if failures else 0)
