#!/usr/bin/env python3
"""Sends pushes with the real aioapns library (PyPI) to pushemu, the way docs/apns.md says:

    import aioapns.connection
    aioapns.connection.APNsDevelopmentClientProtocol.APNS_SERVER = "localhost"
    aioapns.connection.APNsDevelopmentClientProtocol.APNS_PORT = 8443
    # and SSL_CERT_FILE=Certs/ca.pem in the environment (aioapns's default SSL context reads it)

usage: SSL_CERT_FILE=Certs/ca.pem aioapns_send.py PORT token KEYFILE KEY_ID TEAM_ID TOPIC COUNT [BADTOKEN]
       SSL_CERT_FILE=Certs/ca.pem aioapns_send.py PORT cert CERT_AND_KEY_PEM COUNT
Prints one JSON line per push: {"id", "ok", "status", "description"}.
"""
import asyncio, json, sys, uuid

import aioapns.connection
from aioapns import APNs, NotificationRequest, PushType

port = int(sys.argv[1])
mode = sys.argv[2]

# The recipe: the host and port aioapns dials (and names in its host header), nothing else.
aioapns.connection.APNsDevelopmentClientProtocol.APNS_SERVER = "localhost"
aioapns.connection.APNsDevelopmentClientProtocol.APNS_PORT = port

async def main():
    if mode == "token":
        keyfile, key_id, team_id, topic, count = sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], int(sys.argv[7])
        bad = sys.argv[8] if len(sys.argv) > 8 else None
        client = APNs(key=open(keyfile).read(), key_id=key_id, team_id=team_id, topic=topic, use_sandbox=True)
    else:
        certfile, count = sys.argv[3], int(sys.argv[4])
        bad = None
        client = APNs(client_cert=certfile, use_sandbox=True)
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
