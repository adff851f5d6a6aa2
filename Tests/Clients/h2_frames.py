#!/usr/bin/env python3
"""A raw HTTP/2 client (standard library only) that prints every frame it receives.

Used by the tests to check what no ordinary client shows: a TLS connection that negotiates no
ALPN but sends the HTTP/2 preface anyway (as Pushy and aioapns do), SETTINGS values per SNI,
GOAWAY debug data, frame flags.

usage: h2_frames.py PORT [--tls] [--sni NAME] [--alpn h2] [--cafile F] [--path P]... [--host H] [--wait S]
Prints lines such as:
  ALPN None
  SETTINGS flags=0 3=1000 4=1048576 6=16384
  HEADERS stream=1 flags=5 status=200
  DATA stream=1 flags=1 len=15 data=...
  GOAWAY last=1 code=0 debug={"reason":"x"}
"""
import argparse, socket, ssl, sys, time

def hpack_literal(name_index, value):
    v = value.encode()
    assert len(v) < 127
    return bytes([name_index]) + bytes([len(v)]) + v   # literal without indexing, indexed name (4-bit prefix)

def request_block(path, authority):
    block = b"\x83" if False else b"\x82"          # :method GET
    block += b"\x87"                                # :scheme https
    block += hpack_literal(0x04, path)              # :path
    if authority:
        block += hpack_literal(0x01, authority)     # :authority
    return block

def frame(ftype, flags, stream, payload):
    return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + stream.to_bytes(4, "big") + payload

STATIC_STATUS = {0x88: "200", 0x89: "204", 0x8a: "206", 0x8b: "304", 0x8c: "400", 0x8d: "404", 0x8e: "500"}

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--tls", action="store_true")
    ap.add_argument("--sni")
    ap.add_argument("--alpn")
    ap.add_argument("--cafile")
    ap.add_argument("--path", action="append", default=[])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--authority", default="localhost")
    ap.add_argument("--wait", type=float, default=2.0)
    ap.add_argument("--ping", action="store_true", help="send a PING and wait for its ACK")
    a = ap.parse_args()
    sock = socket.create_connection((a.host, a.port), timeout=a.wait)
    if a.tls:
        ctx = ssl.create_default_context(cafile=a.cafile)
        if not a.cafile:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if a.alpn:
            ctx.set_alpn_protocols([a.alpn])
        sock = ctx.wrap_socket(sock, server_hostname=a.sni or "localhost")
        print("ALPN", sock.selected_alpn_protocol())
    out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b"")
    if a.ping:
        out += frame(6, 0, 0, b"pushemu!")
    stream = 1
    for p in a.path:
        out += frame(1, 0x05, stream, request_block(p, a.authority))
        stream += 2
    sock.sendall(out)
    buf = b""
    deadline = time.time() + a.wait
    remaining = len(a.path) + (1 if a.ping else 0)
    sock.settimeout(0.2)
    while time.time() < deadline:
        try:
            d = sock.recv(65536)
        except (socket.timeout, TimeoutError):
            if remaining == 0:
                break
            continue
        except (ConnectionResetError, ssl.SSLError):
            print("RESET")
            break
        if not d:
            print("EOF")
            break
        buf += d
        while len(buf) >= 9:
            n = int.from_bytes(buf[0:3], "big")
            if len(buf) < 9 + n:
                break
            t, fl, sid, pl = buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF, buf[9:9 + n]
            buf = buf[9 + n:]
            if t == 4:
                items = " ".join(f"{int.from_bytes(pl[i:i+2],'big')}={int.from_bytes(pl[i+2:i+6],'big')}" for i in range(0, len(pl), 6))
                print(f"SETTINGS flags={fl} {items}".rstrip())
                if not fl & 1:
                    sock.sendall(frame(4, 1, 0, b""))
            elif t == 1:
                print(f"HEADERS stream={sid} flags={fl} status={STATIC_STATUS.get(pl[0], 'literal')}")
                if fl & 1:
                    remaining -= 1
            elif t == 0:
                print(f"DATA stream={sid} flags={fl} len={n} data={pl[:200].decode(errors='replace')}")
                if fl & 1:
                    remaining -= 1
            elif t == 7:
                print(f"GOAWAY last={int.from_bytes(pl[0:4],'big')} code={int.from_bytes(pl[4:8],'big')} debug={pl[8:].decode(errors='replace')}")
            elif t == 3:
                print(f"RST_STREAM stream={sid} code={int.from_bytes(pl[0:4],'big')}")
                remaining -= 1
            elif t == 8:
                print(f"WINDOW_UPDATE stream={sid} inc={int.from_bytes(pl[0:4],'big')}")
            elif t == 6:
                print(f"PING flags={fl} data={pl.decode(errors='replace')}")
                if fl & 1:
                    remaining -= 1
            else:
                print(f"FRAME type={t} stream={sid} flags={fl} len={n}")
    sys.stdout.flush()

if __name__ == "__main__":
    main()
