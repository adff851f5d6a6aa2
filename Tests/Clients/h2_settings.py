#!/usr/bin/env python3
"""Prints the server's SETTINGS_MAX_CONCURRENT_STREAMS for a TLS connection with a given SNI.

usage: h2_settings.py PORT CAFILE SNI
"""
import socket, ssl, sys, time
import h2.config, h2.connection, h2.events, h2.settings

port, cafile, sni = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ctx = ssl.create_default_context(cafile=cafile)
ctx.set_alpn_protocols(["h2"])
sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=5), server_hostname=sni)
c = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
c.initiate_connection()
sock.sendall(c.data_to_send())
deadline = time.time() + 5
while time.time() < deadline:
    for e in c.receive_data(sock.recv(65536)):
        if isinstance(e, h2.events.RemoteSettingsChanged):
            s = e.changed_settings.get(h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS)
            print("max_concurrent_streams=%s" % (s.new_value if s else "unset"))
            sys.exit(0)
    sock.sendall(c.data_to_send())
sys.exit(1)
