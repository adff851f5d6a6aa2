#!/usr/bin/env python3
"""Prints the server's SETTINGS_MAX_CONCURRENT_STREAMS for a TLS connection with a given SNI.

usage: h2_settings.py PORT CAFILE SNI
"""
import sys, time
import h2.events, h2.settings
import h2_tls

port, cafile, sni = int(sys.argv[1]), sys.argv[2], sys.argv[3]
sock, c = h2_tls.connect(port, cafile, sni)
deadline = time.time() + 5
while time.time() < deadline:
    for e in c.receive_data(sock.recv(65536)):
        if isinstance(e, h2.events.RemoteSettingsChanged):
            s = e.changed_settings.get(h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS)
            print("max_concurrent_streams=%s" % (s.new_value if s else "unset"))
            sys.exit(0)
    sock.sendall(c.data_to_send())
sys.exit(1)
