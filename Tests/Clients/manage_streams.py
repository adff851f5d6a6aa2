#!/usr/bin/env python3
"""Channel management over TLS with a provider token, on Python's h2: prints the server's
SETTINGS_MAX_CONCURRENT_STREAMS before and after the first valid token, and the answer.

usage: manage_streams.py PORT CAFILE SNI BUNDLE JWT
"""
import socket, sys, time
import h2.events, h2.settings
import h2_tls

port, cafile, sni, bundle, jwt = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
sock, c = h2_tls.connect(port, cafile, sni)
limits, status, body, sent, done = [], None, b"", False, False
deadline = time.time() + 10
while time.time() < deadline and not (done and len(limits) >= 2):
    try:
        data = sock.recv(65536)
    except (TimeoutError, socket.timeout):
        break
    if not data:
        break
    for e in c.receive_data(data):
        if isinstance(e, h2.events.RemoteSettingsChanged):
            s = e.changed_settings.get(h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS)
            if s:
                limits.append(s.new_value)
        elif isinstance(e, h2.events.ResponseReceived):
            status = dict(e.headers).get(b":status", b"").decode()
        elif isinstance(e, h2.events.DataReceived):
            body += e.data
            c.acknowledge_received_data(len(e.data), e.stream_id)
        elif isinstance(e, h2.events.StreamEnded):
            done = True
    if limits and not sent:
        c.send_headers(1, [(":method", "GET"), (":scheme", "https"), (":authority", sni),
                           (":path", "/1/apps/%s/all-channels" % bundle), ("authorization", "bearer " + jwt)], end_stream=True)
        sent = True
    sock.sendall(c.data_to_send())
print("limits=%s status=%s body=%s" % (",".join(map(str, limits)), status, body.decode()))
