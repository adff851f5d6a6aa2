#!/usr/bin/env python3
"""Real clients meeting injected faults.

usage:
  fault_clients.py aioapns PORT CAFILE KEYFILE KEY_ID TEAM_ID TOPIC
      sends one push with aioapns; on 503 ServiceUnavailable the sender retries (aioapns reports,
      the application retries, as production senders do); prints the statuses seen.
  fault_clients.py firebase HTTP_BASE CREDENTIALS PROJECT TOKEN
      messaging.send() through firebase-admin (which retries 503 and honours Retry-After);
      prints {"name", "seconds"}.
  fault_clients.py goaway PORT TOKEN JWT
      h2 over cleartext: a push, then GOAWAY is expected; reconnects and pushes again; prints
      {"first", "goaway", "second"}.
"""
import asyncio, json, socket, ssl, sys, time, uuid

mode = sys.argv[1]

if mode == "aioapns":
    import aioapns.connection as conn
    from aioapns import APNs, NotificationRequest, PushType
    port, cafile, keyfile, kid, team, topic = int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7]
    conn.APNsTLSClientProtocol.APNS_PORT = port
    _gai = socket.getaddrinfo
    socket.getaddrinfo = lambda host, *a, **k: _gai("127.0.0.1" if isinstance(host, str) and host.endswith("push.apple.com") else host, *a, **k)

    async def main():
        client = APNs(key=open(keyfile).read(), key_id=kid, team_id=team, topic=topic, use_sandbox=True,
                      ssl_context=ssl.create_default_context(cafile=cafile))
        seen = []
        for attempt in range(4):
            r = await client.send_notification(NotificationRequest(
                device_token="%064x" % 0xfee1, message={"aps": {"alert": "retry me"}}, notification_id=str(uuid.uuid4()),
                push_type=PushType.ALERT))
            seen.append([r.status, r.description])
            if r.status != "503":
                break
            await asyncio.sleep(0.2)
        print(json.dumps(seen))
    asyncio.run(asyncio.wait_for(main(), 30))

elif mode == "firebase":
    import firebase_admin
    from firebase_admin import credentials, messaging
    base, cred, project, token = sys.argv[2:6]
    messaging._MessagingService.FCM_URL = base + "/v1/projects/{0}/messages:send"
    firebase_admin.initialize_app(credentials.Certificate(cred))
    t0 = time.time()
    name = messaging.send(messaging.Message(token=token, data={"k": "v"}))
    print(json.dumps({"name": name, "seconds": time.time() - t0}))

elif mode == "goaway":
    import h2.config, h2.connection, h2.events
    port, token, jwt = int(sys.argv[2]), sys.argv[3], sys.argv[4]

    def push():
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        c = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
        c.initiate_connection()
        c.send_headers(1, [(":method", "POST"), (":scheme", "http"), (":authority", "api.sandbox.push.apple.com"),
                           (":path", "/3/device/" + token), ("apns-topic", "com.example.app"), ("authorization", "bearer " + jwt)])
        c.send_data(1, b'{"aps":{"alert":"x"}}', end_stream=True)
        sock.sendall(c.data_to_send())
        status, goaway, deadline = None, None, time.time() + 5
        while time.time() < deadline and (status is None or goaway is None):
            try:
                data = sock.recv(65536)
            except (socket.timeout, OSError):
                break
            if not data:
                break
            for e in c.receive_data(data):
                if isinstance(e, h2.events.ResponseReceived):
                    status = dict(e.headers).get(b":status", b"").decode()
                elif isinstance(e, h2.events.ConnectionTerminated):
                    goaway = (e.additional_data or b"").decode()
            try:
                sock.sendall(c.data_to_send())
            except OSError:
                break   # the server closed after its GOAWAY
            if status is not None and goaway is None:
                sock.settimeout(0.5)
        sock.close()
        return status, goaway

    s1, g1 = push()
    s2, g2 = push()   # the client reconnects: a new connection
    print(json.dumps({"first": s1, "goaway": g1, "second": s2, "secondGoaway": g2}))
