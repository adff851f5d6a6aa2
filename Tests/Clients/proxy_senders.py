#!/usr/bin/env python3
"""Real senders, left unmodified, reaching pushemu only through the environment `pushemu env`
prints (HTTPS_PROXY, NO_PROXY and the CA bundle variables): no URL, host or class attribute
is changed. The service-account file names Google's own token_uri.

usage: proxy_senders.py CREDENTIALS_JSON PROJECT
Prints one JSON object with what each sender returned or raised.
"""
import asyncio, json, os, subprocess, sys, time

import httpx
import jwt
import requests
from cryptography.hazmat.primitives.asymmetric import ec

cred_path, project = sys.argv[1:3]
out = {"env": {k: os.environ.get(k) for k in ("HTTPS_PROXY", "NO_PROXY", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")}}


def token(i):
    return "p" + format(i, "021d") + ":APA91b" + ("Prx%03d" % i) * 19 + "x"


def err(e):
    return {"type": type(e).__name__, "message": str(e)[:300]}


def attempt(name, fn):
    try:
        out[name] = fn()
    except Exception as e:  # the test asserts on what was raised
        out[name] = {"error": err(e)}


# firebase-admin: google-auth posts the grant to https://oauth2.googleapis.com/token and
# messaging posts to https://fcm.googleapis.com, both through the proxy (requests reads the
# proxy and REQUESTS_CA_BUNDLE from the environment).
import firebase_admin
from firebase_admin import credentials, messaging

app = firebase_admin.initialize_app(credentials.Certificate(cred_path))
attempt("admin_send", lambda: messaging.send(messaging.Message(
    token=token(1), notification=messaging.Notification(title="Proxy", body="firebase-admin"))))
def send_each():
    r = messaging.send_each([messaging.Message(token=token(i), data={"n": str(i)}) for i in (2, 3)])
    return {"success": r.success_count, "failure": r.failure_count}
attempt("admin_send_each", send_each)
def subscribe():
    r = messaging.subscribe_to_topic([token(1), token(2)], "proxied")
    return {"success": r.success_count, "failure": r.failure_count}
attempt("admin_subscribe", subscribe)

# pyfcm: its FCM_END_POINT_BASE is https://fcm.googleapis.com (requests, google-auth).
from pyfcm import FCMNotification

attempt("pyfcm_notify", lambda: FCMNotification(service_account_file=cred_path, project_id=project).notify(
    fcm_token=token(4), notification_title="Proxy", notification_body="pyfcm"))

# async-firebase: httpx, and its OAuth grant goes to a hard-coded https://oauth2.googleapis.com/token.
from async_firebase import AsyncFirebaseClient
from async_firebase.messages import Message, Notification


async def async_firebase_send():
    client = AsyncFirebaseClient()
    client.creds_from_service_account_file(cred_path)
    try:
        r = await client.send(Message(token=token(5), notification=Notification(title="Proxy", body="async-firebase")))
        return {"success": r.success, "message_id": r.message_id,
                "exception": None if r.exception is None else str(r.exception)[:200]}
    finally:
        await client.close()

attempt("async_firebase_send", lambda: asyncio.run(async_firebase_send()))

# An APNs sender on httpx with HTTP/2 (trust_env: HTTPS_PROXY and SSL_CERT_FILE).
key = ec.generate_private_key(ec.SECP256R1())
provider_token = jwt.encode({"iss": "PROXYTEAM1", "iat": int(time.time())}, key, algorithm="ES256",
                            headers={"kid": "PROXYKEY01"})
device = "ab" * 32


def apns(host, topic="com.example.proxy"):
    with httpx.Client(http2=True, timeout=10) as c:
        r = c.post(f"https://{host}/3/device/{device}", json={"aps": {"alert": {"title": "Proxy", "body": host}}},
                   headers={"authorization": "bearer " + provider_token, "apns-topic": topic, "apns-push-type": "alert"})
        return {"status": r.status_code, "http_version": r.http_version, "apns_id": r.headers.get("apns-id"), "body": r.text}

attempt("httpx_apns_sandbox", lambda: apns("api.sandbox.push.apple.com"))
attempt("httpx_apns_production", lambda: apns("api.push.apple.com"))

# curl reads https_proxy and CURL_CA_BUNDLE itself.
def curl():
    p = subprocess.run(
        ["curl", "-sS", "--http2", "-o", "/dev/null", "-w", "%{http_code} %{http_version}", "--max-time", "10",
         "-H", "authorization: bearer " + provider_token, "-H", "apns-topic: com.example.proxy",
         "-d", '{"aps":{"alert":"curl"}}', f"https://api.development.push.apple.com/3/device/{device}"],
        capture_output=True, text=True, timeout=20)
    return {"rc": p.returncode, "out": p.stdout, "err": p.stderr[:200]}
attempt("curl_apns", curl)

# Any other host is refused at CONNECT: nothing leaves this machine.
def refused_httpx():
    with httpx.Client(timeout=10) as c:
        c.get("https://example.com/")
    return "connected"
attempt("refused_httpx", refused_httpx)
attempt("refused_requests", lambda: requests.get("https://www.example.org/", timeout=10).status_code)

print(json.dumps(out, default=str))
