#!/usr/bin/env python3
"""Drives pushemu with the real firebase-admin SDK (PyPI), unchanged except for the URLs.

The credentials file comes from `pushemu credentials fcm` (its token_uri points at pushemu),
so google-auth fetches the access token from pushemu's /token.

usage: fcm_admin.py HTTP_BASE HTTPS_BASE CREDENTIALS_JSON PROJECT
Prints one JSON object with what each call returned or raised.
"""
import asyncio, json, sys, urllib.request

import httpx
import firebase_admin
from firebase_admin import credentials, messaging, exceptions

http_base, https_base, cred_path, project = sys.argv[1:5]

def token(i):
    return "e" + format(i, "021d") + ":APA91b" + ("Tok%03d" % i) * 19 + "x"

def admin(method, path):
    req = urllib.request.Request(http_base + path, method=method)
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())

def err(e):
    return {"type": type(e).__name__, "code": getattr(e, "code", None), "message": str(e)[:300]}

out = {}
# HTTP/1.1 (requests) for send / send_each / topic management.
messaging._MessagingService.FCM_URL = http_base + "/v1/projects/{0}/messages:send"
messaging._MessagingService.IID_URL = http_base
app = firebase_admin.initialize_app(credentials.Certificate(cred_path))
svc = messaging._get_messaging_service(app)
# firebase-admin 7.7+ subscribes through the v1 registrations API on a host derived from nothing
# configurable; point the instance attribute at the emulator too.
svc._fcm_topic_url = http_base + "/v1/projects/" + project + "/registrations"

t = [token(i) for i in range(1, 7)]
out["send"] = messaging.send(messaging.Message(token=t[0], data={"_mId": "12345", "_dId": "67890"},
                                               notification=messaging.Notification(title="Hello", body="World"),
                                               android=messaging.AndroidConfig(priority="high", ttl=3600)))
# fid (the Firebase installation id, the token's part before the colon) reaches the same device.
out["fid_send"] = messaging.send(messaging.Message(fid=t[0].split(":")[0], data={"via": "fid"}))
try:
    messaging.send(messaging.Message(fid="cAAAAAAAAAAAAAAAAAAAAA", data={"k": "v"}))
    out["fid_unknown"] = "sent"
except exceptions.FirebaseError as e:
    out["fid_unknown"] = err(e)
out["dry_run"] = messaging.send(messaging.Message(token=t[1], data={"k": "v"}), dry_run=True)
r = messaging.send_each([messaging.Message(token=x, data={"n": str(i)}) for i, x in enumerate(t[:3])])
out["send_each"] = {"success": r.success_count, "failure": r.failure_count, "ids": [x.message_id for x in r.responses]}

# Topics: the v1 per-registration API (subscribe_to_topic) and the legacy Instance ID API.
s = messaging.subscribe_to_topic([t[0], t[1]], "news")
out["subscribe"] = {"success": s.success_count, "failure": s.failure_count}
s = messaging.subscribe_to_topic_legacy([t[2], t[3]], "sports")
out["subscribe_legacy"] = {"success": s.success_count, "failure": s.failure_count}
s = messaging.subscribe_to_topic_legacy([t[1], "not-a-token"], "sports")
out["subscribe_legacy_partial"] = {"success": s.success_count, "failure": s.failure_count,
                                   "errors": [[e.index, e.reason] for e in s.errors]}
s = messaging.unsubscribe_from_topic_legacy([t[3]], "sports")
out["unsubscribe_legacy"] = {"success": s.success_count, "failure": s.failure_count}
s = messaging.unsubscribe_from_topic([t[1]], "news")
out["unsubscribe"] = {"success": s.success_count, "failure": s.failure_count}
admin("POST", "/emulator/v1/reset?notifications=only") if False else None
out["topic_send"] = messaging.send(messaging.Message(topic="news", data={"k": "topic"}))
out["condition_send"] = messaging.send(messaging.Message(condition="'sports' in topics && !('news' in topics)",
                                                         data={"k": "condition"}))
# Failures.
try:
    messaging.send(messaging.Message(token=t[4], data={"big": "x" * 5000}))
    out["oversized"] = "no error"
except Exception as e:
    out["oversized"] = err(e)
admin("DELETE", "/emulator/v1/devices/" + t[0])
try:
    messaging.send(messaging.Message(token=t[0], data={"k": "v"}))
    out["unregistered"] = "no error"
except Exception as e:
    out["unregistered"] = err(e)
try:
    messaging.send(messaging.Message(token=t[0], data={"k": "v"}), dry_run=True)
    out["unregistered_dry_run"] = "no error"
except Exception as e:
    out["unregistered_dry_run"] = err(e)

# HTTP/2 over TLS (httpx, ALPN) for send_each_async: a second app formats the https URL.
versions = []
_send = httpx.AsyncClient.send
async def _recording_send(self, request, *a, **kw):
    resp = await _send(self, request, *a, **kw)
    versions.append(resp.http_version)
    return resp
httpx.AsyncClient.send = _recording_send
messaging._MessagingService.FCM_URL = https_base + "/v1/projects/{0}/messages:send"
app2 = firebase_admin.initialize_app(credentials.Certificate(cred_path), name="h2")
async def run_async():
    return await messaging.send_each_async([messaging.Message(token=x, data={"async": "1"}) for x in t[3:6]], app=app2)
r = asyncio.run(run_async())
out["send_each_async"] = {"success": r.success_count, "failure": r.failure_count, "http_versions": sorted(set(versions))}
print(json.dumps(out))
