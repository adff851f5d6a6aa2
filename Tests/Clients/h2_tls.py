"""A client-side HTTP/2 connection over TLS (ALPN h2, verified against CAFILE for SNI) on
Python's h2, its preface sent: what the small h2 clients here start from."""
import socket, ssl
import h2.config, h2.connection


def connect(port, cafile, sni, timeout=5):
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.set_alpn_protocols(["h2"])
    sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=timeout), server_hostname=sni)
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    return sock, conn
