#!/usr/bin/env python3
"""Sends pushes with the real aioapns library (PyPI) to pushemu.

aioapns dials api.development.push.apple.com:443 (sandbox) without ALPN and sends only a
`host` header; here name resolution is pointed at 127.0.0.1 and the port at pushemu's.

usage: aioapns_send.py PORT CAFILE token KEYFILE KEY_ID TEAM_ID TOPIC COUNT [BADTOKEN]
       aioapns_send.py PORT CAFILE cert CERT_AND_KEY_PEM COUNT
Prints one JSON line per push: {"id", "ok", "status", "description"}.
"""
import asyncio, json, socket, ssl, sys, uuid

import aioapns.connection as conn
from aioapns import APNs, NotificationRequest, PushType

port = int(sys.argv[1])
cafile = sys.argv[2]
mode = sys.argv[3]

conn.APNsTLSClientProtocol.APNS_PORT = port
_getaddrinfo = socket.getaddrinfo
def _resolve(host, *args, **kwargs):
    if isinstance(host, str) and host.endswith("push.apple.com"):
        host = "127.0.0.1"
    return _getaddrinfo(host, *args, **kwargs)
socket.getaddrinfo = _resolve

async def main():
    ctx = ssl.create_default_context(cafile=cafile)
    if mode == "token":
        keyfile, key_id, team_id, topic, count = sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7], int(sys.argv[8])
        bad = sys.argv[9] if len(sys.argv) > 9 else None
        client = APNs(key=open(keyfile).read(), key_id=key_id, team_id=team_id, topic=topic, use_sandbox=True, ssl_context=ctx)
    else:
        certfile, count = sys.argv[4], int(sys.argv[5])
        bad = None
        client = APNs(client_cert=certfile, use_sandbox=True, ssl_context=ctx)
    tokens = ["%064x" % (0xabc0000 + i) for i in range(count)]
    if bad:
        tokens.append(bad)
    async def one(i, token):
        req = NotificationRequest(
            device_token=token,
            message={"aps": {"alert": {"title": "Hello %d" % i, "body": "from aioapns"}, "mutable-content": 1},
                     "_mId": "m%d" % i, "_dId": "d%d" % i},
            notification_id=str(uuid.uuid4()),
            push_type=PushType.ALERT,
        )
        r = await client.send_notification(req)
        return {"id": r.notification_id, "ok": r.is_successful, "status": r.status, "description": r.description}
    results = await asyncio.wait_for(asyncio.gather(*(one(i, t) for i, t in enumerate(tokens))), timeout=30)
    for r in results:
        print(json.dumps(r))

asyncio.run(main())
