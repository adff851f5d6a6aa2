#!/usr/bin/env python3
"""Checks APNs connection behaviour with the `h2` library: SETTINGS_MAX_CONCURRENT_STREAMS is
1 on a new token connection to an APNs host and rises after the first valid token; a rejected
push carries {"reason"}; GOAWAY debug data is printed when the server sends one.

usage: apns_settings.py PORT CAFILE SNI JWT TOPIC [--hold SECONDS]
Prints lines: "SETTINGS max_concurrent_streams=N", "RESPONSE status=N body=...", "GOAWAY debug=..."
"""
import socket, ssl, sys, time
import h2.config, h2.connection, h2.events

port, cafile, sni, jwt, topic = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
hold = float(sys.argv[7]) if len(sys.argv) > 7 and sys.argv[6] == "--hold" else 0.0

ctx = ssl.create_default_context(cafile=cafile)
ctx.set_alpn_protocols(["h2"])
sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=5), server_hostname=sni)
sock.settimeout(0.05)
c = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
c.initiate_connection()
sock.sendall(c.data_to_send())

def pump(until, deadline):
    bodies = {}
    while time.time() < deadline:
        try:
            data = sock.recv(65536)
        except socket.timeout:
            continue
        if not data:
            print("EOF"); return True
        for ev in c.receive_data(data):
            if isinstance(ev, h2.events.RemoteSettingsChanged):
                s = ev.changed_settings.get(h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS)
                if s is not None:
                    print("SETTINGS max_concurrent_streams=%d" % s.new_value)
            elif isinstance(ev, h2.events.ResponseReceived):
                bodies[ev.stream_id] = [dict(ev.headers)[b":status"].decode(), b""]
            elif isinstance(ev, h2.events.DataReceived):
                bodies[ev.stream_id][1] += ev.data
                c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                st, body = bodies.pop(ev.stream_id)
                print("RESPONSE status=%s body=%s" % (st, body.decode()))
            elif isinstance(ev, h2.events.ConnectionTerminated):
                print("GOAWAY debug=%s" % (ev.additional_data or b"").decode())
                sock.sendall(c.data_to_send()); return True
        sock.sendall(c.data_to_send())
        if until():
            return False
    return False

sent = {"n": 0}
def send(auth):
    sid = c.get_next_available_stream_id()
    headers = [(":method", "POST"), (":scheme", "https"), (":path", "/3/device/" + "ab" * 32),
               (":authority", sni), ("apns-topic", topic), ("apns-push-type", "alert")]
    if auth:
        headers.append(("authorization", "bearer " + auth))
    c.send_headers(sid, headers)
    c.send_data(sid, b'{"aps":{"alert":"hi"}}', end_stream=True)
    sock.sendall(c.data_to_send())

pump(lambda: False, time.time() + 0.5)        # server preface: SETTINGS
send(None)                                      # 403 MissingProviderToken; still 1 stream
pump(lambda: False, time.time() + 0.5)
send(jwt)                                       # 200; SETTINGS raised
pump(lambda: False, time.time() + 0.5)
if hold > 0:
    pump(lambda: False, time.time() + hold)
sys.stdout.flush()
