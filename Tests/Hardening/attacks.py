#!/usr/bin/env python3
"""pushemu's attack suite: each case starts the binary, attacks it the way a broken or hostile
client would, and checks, during and after the attack, that

  - the process is alive,
  - /healthz answers on a NEW connection within 1 s (probed every 200 ms, on its own thread),
  - RSS stays under the case's bound, and after the attack comes back near the baseline,
  - the attack itself was ended the way it should be (GOAWAY with the right code, 503, a
    close within the timeout, ...).

Standard library only; talks to 127.0.0.1 only; every case bounded in time.

usage: attacks.py --binary PATH [--list] [CASE ...]
Exit status 0 when every case passed. Prints one line per check.
"""
import argparse, glob, json, os, random, re, select, shutil, socket, ssl, struct, subprocess, sys, tempfile, threading, time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, END_HEADERS, PADDED = 0x1, 0x4, 0x8
ENHANCE_YOUR_CALM, REFUSED_STREAM = 0xB, 0x7
MiB = 1 << 20


# ---------------------------------------------------------------------------------------------
# HTTP/2 bytes

def frame(ftype, flags, stream, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + stream.to_bytes(4, "big") + payload


def lit(name_index, value):
    """HPACK literal without indexing, indexed name (values < 127 bytes)."""
    v = value.encode() if isinstance(value, str) else value
    assert len(v) < 127
    return bytes([name_index, len(v)]) + v


def lit_new(name, value):
    """HPACK literal without indexing, new name."""
    n, v = name.encode(), value.encode()
    assert len(n) < 127 and len(v) < 127
    return b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v


def hpack_int(value, prefix_bits, first):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = bytearray([first | limit])
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def request_block(method="GET", path="/healthz", authority="localhost"):
    block = b"\x82" if method == "GET" else b"\x83"  # :method GET / POST
    block += b"\x86"                                  # :scheme http
    block += lit(0x04, path)                          # :path
    block += lit(0x01, authority)                     # :authority
    return block


def settings(**values):
    ids = {"header_table_size": 1, "enable_push": 2, "max_concurrent_streams": 3, "initial_window_size": 4,
           "max_frame_size": 5, "max_header_list_size": 6}
    payload = b"".join(struct.pack(">HI", ids[k], v) for k, v in values.items())
    return frame(SETTINGS, 0, 0, payload)


def split_frames(buf):
    """The whole frames at the start of `buf` as (type, flags, stream, payload), and the rest."""
    frames = []
    while len(buf) >= 9:
        n = int.from_bytes(buf[:3], "big")
        if len(buf) < 9 + n:
            break
        frames.append((buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF, buf[9:9 + n]))
        buf = buf[9 + n:]
    return frames, buf


class H2Reader:
    """Reads frames from a socket on a thread: counts them, keeps GOAWAYs and RSTs."""

    def __init__(self, sock):
        self.sock = sock
        self.goaway = None
        self.rst = {}
        self.headers = 0
        self.closed = False
        self.bytes = 0
        self.statuses = []
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        buf = b""
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    break
                self.bytes += len(chunk)
                buf += chunk
                frames, buf = split_frames(buf)
                for t, flags, sid, payload in frames:
                    if t == GOAWAY and self.goaway is None:
                        last, code = struct.unpack(">II", payload[:8])
                        self.goaway = (last & 0x7FFFFFFF, code, payload[8:])
                    elif t == RST_STREAM:
                        self.rst[sid] = struct.unpack(">I", payload[:4])[0]
                    elif t == HEADERS:
                        self.headers += 1
                        if payload[:1] and payload[0] & 0x80:
                            self.statuses.append(payload[0])
        except OSError:
            pass
        self.closed = True


def h2_connect(port, window=None):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    init = settings(initial_window_size=window) if window is not None else settings()
    s.sendall(PREFACE + init + frame(SETTINGS, 1, 0))
    return s


def send_until_closed(sock, data, seconds, reader=None, stop=None):
    """Writes `data` repeatedly until the peer closes, `seconds` pass, or `stop()` is true.
    Returns the bytes written."""
    sent = 0
    deadline = time.time() + seconds
    sock.settimeout(1)
    while time.time() < deadline:
        if reader is not None and reader.closed:
            break
        if stop is not None and stop():
            break
        try:
            sock.sendall(data)
            sent += len(data)
        except (BrokenPipeError, ConnectionResetError, socket.timeout, OSError):
            break
    return sent


# ---------------------------------------------------------------------------------------------
# The server, and the probes every case runs

class Server:
    def __init__(self, binary, extra, wrapper=()):
        self.out = tempfile.NamedTemporaryFile(prefix="pushemu-attack-", suffix=".out", delete=False)
        self.err = tempfile.NamedTemporaryFile(prefix="pushemu-attack-", suffix=".err", delete=False)
        args = list(wrapper) + [binary, "serve", "--http-port", "0", "--https-port", "0", "--in-memory"] + extra
        self.binary = binary
        self.proc = subprocess.Popen(args, stdout=self.out, stderr=self.err, stdin=subprocess.DEVNULL)
        deadline = time.time() + 20
        self.http = self.https = None
        while time.time() < deadline:
            text = open(self.out.name).read()
            m = re.search(r"http=[^ ]*:(\d+) https=[^ ]*:(\d+)", text)
            if m:
                self.http, self.https = int(m.group(1)), int(m.group(2))
                break
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        if self.http is None:
            raise SystemExit("pushemu did not start: " + open(self.err.name).read())

    def alive(self):
        return self.proc.poll() is None

    def rss_mib(self):
        try:
            for line in open(f"/proc/{self.proc.pid}/status"):
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return -1

    def open_connections(self):
        status, body = http1(self.http, "GET", "/metrics", timeout=5)
        m = re.search(r"^pushemu_open_connections (\d+)", body.decode(errors="replace"), re.M)
        return int(m.group(1)) if m else -1

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for f in (self.out, self.err):
            try:
                os.unlink(f.name)
            except OSError:
                pass

    def stderr(self):
        try:
            return open(self.err.name).read()
        except OSError:
            return ""


def http1(port, method, path, body=b"", headers=None, timeout=5.0):
    """One HTTP/1.1 request on a new connection; returns (status, body)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        host = (headers or {}).get("host", "localhost")
        head = f"{method} {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\ncontent-length: {len(body)}\r\n"
        for k, v in (headers or {}).items():
            if k == "host":
                continue
            head += f"{k}: {v}\r\n"
        s.sendall(head.encode() + b"\r\n" + body)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        if not data:
            return 0, b""
        status = int(data.split(b" ", 2)[1])
        return status, data.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in data else b""
    finally:
        s.close()


class Prober:
    """Probes /healthz on a new connection every 200 ms; keeps the worst latency and RSS."""

    def __init__(self, server):
        self.server = server
        self.worst = 0.0
        self.failures = []
        self.peak_rss = server.rss_mib()
        self.running = True
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def probe(self):
        start = time.time()
        try:
            status, _ = http1(self.server.http, "GET", "/healthz", timeout=1.0)
            took = time.time() - start
            if status != 200:
                self.failures.append(f"/healthz answered {status}")
            return took
        except OSError as e:
            self.failures.append(f"/healthz failed after {time.time() - start:.2f}s: {e}")
            return time.time() - start

    def run(self):
        while self.running:
            self.worst = max(self.worst, self.probe())
            self.peak_rss = max(self.peak_rss, self.server.rss_mib())
            time.sleep(0.2)

    def stop(self):
        self.running = False
        self.thread.join(5)


class Case:
    def __init__(self, name, server, rss_bound):
        self.name = name
        self.server = server
        self.rss_bound = rss_bound
        self.ok = True
        self.lines = []

    def check(self, condition, what):
        self.lines.append(("ok  " if condition else "FAIL") + f" {self.name}: {what}")
        if not condition:
            self.ok = False
        return condition


def settle(server, baseline, seconds=6):
    """Waits for RSS to come back near the baseline; returns the last reading."""
    deadline = time.time() + seconds
    rss = server.rss_mib()
    while time.time() < deadline and rss > baseline + 40:
        time.sleep(0.25)
        rss = server.rss_mib()
    return rss


# ---------------------------------------------------------------------------------------------
# The cases. Each returns nothing and records its checks on `case`.

def rapid_reset(case):
    s = h2_connect(case.server.http)
    r = H2Reader(s)
    padded = bytes([200]) + request_block() + b"\x00" * 200
    burst = b"".join(frame(HEADERS, END_HEADERS | PADDED, sid, padded) + frame(RST_STREAM, 0, sid, struct.pack(">I", 8))
                     for sid in range(1, 4001, 2))
    send_until_closed(s, burst, 4, r, stop=lambda: r.goaway is not None)
    wait(lambda: r.closed, 3)
    case.check(r.goaway is not None, f"rapid reset ended with GOAWAY (code {r.goaway and r.goaway[1]}) after {len(r.rst)} resets")
    case.check(r.closed, "the connection was closed after it")


def control_flood(case, kind):
    s = h2_connect(case.server.http)
    r = H2Reader(s)
    if kind == "window-update":
        unit = frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1))
    elif kind == "ping":
        unit = frame(PING, 0, 0, b"12345678")
    elif kind == "settings":
        unit = frame(SETTINGS, 0, 0, b"")
    elif kind == "priority":
        unit = frame(PRIORITY, 0, 3, struct.pack(">IB", 0, 16))
    else:  # empty DATA on an open stream
        s.sendall(frame(HEADERS, END_HEADERS, 1, request_block("POST", "/emulator/v1/devices")))
        unit = frame(DATA, 0, 1, b"")
    send_until_closed(s, unit * 2000, 5, r, stop=lambda: r.goaway is not None)
    wait(lambda: r.closed, 3)
    code = r.goaway and r.goaway[1]
    case.check(code == ENHANCE_YOUR_CALM, f"{kind} flood ended with GOAWAY ENHANCE_YOUR_CALM (code {code})")
    case.check(r.closed, "the connection was closed after it")


def continuation_flood(case):
    s = h2_connect(case.server.http)
    r = H2Reader(s)
    s.sendall(frame(HEADERS, 0, 1, request_block()))
    send_until_closed(s, frame(CONTINUATION, 0, 1, lit_new("x-flood", "x" * 100)) * 500, 4, r)
    wait(lambda: r.closed, 3)
    case.check(r.goaway is not None and r.goaway[1] == ENHANCE_YOUR_CALM,
               f"CONTINUATION flood ended with GOAWAY (code {r.goaway and r.goaway[1]})")


def hpack_bomb(case):
    s = h2_connect(case.server.http)
    r = H2Reader(s)
    value = b"v" * 4000
    # First stream: add a 4 KB entry to the dynamic table (literal with incremental indexing).
    entry = b"\x40" + bytes([6]) + b"x-bomb" + hpack_int(len(value), 7, 0) + value
    s.sendall(frame(HEADERS, END_HEADERS | END_STREAM, 1, request_block() + entry))
    refs = b"\xbe" * 16000  # index 62: the entry, 16,000 times (64 MB decoded per stream)
    sid = 3
    deadline = time.time() + 5
    while time.time() < deadline and not r.closed:
        try:
            s.sendall(frame(HEADERS, END_HEADERS | END_STREAM, sid, request_block() + refs))
        except OSError:
            break
        sid += 2
    case.check(len(r.rst) + r.headers > 0, f"the bomb's streams were answered or reset ({r.headers} answers, {len(r.rst)} resets)")


def oversized_headers(case):
    s = h2_connect(case.server.http)
    r = H2Reader(s)
    block = request_block() + b"".join(lit_new("x-big", "y" * 120) for _ in range(300))  # 45 KB of header list
    parts = [block[i:i + 16000] for i in range(0, len(block), 16000)]
    for sid in range(1, 200, 2):
        frames = frame(HEADERS, END_STREAM | (END_HEADERS if len(parts) == 1 else 0), sid, parts[0])
        for k, part in enumerate(parts[1:], 1):
            frames += frame(CONTINUATION, END_HEADERS if k == len(parts) - 1 else 0, sid, part)
        s.sendall(frames)
    wait(lambda: r.headers + len(r.rst) >= 100 or r.closed, 5)
    case.check(r.headers + len(r.rst) >= 100, f"every oversized stream answered 431 or reset ({r.headers} + {len(r.rst)})")


def overlong_fields(case):
    """Under a raised header list limit, accepted pushes whose `apns-topic` or `x-*` header holds
    65,536 bytes (the most HPACK allows a field) are answered 200 and kept, cut to 65,535 bytes
    in the notification log (a record's lengths are u16s; the log once trapped on them)."""
    jwt = provider_token(case.server.binary)

    def field(name, value):
        n, v = name.encode(), value.encode()
        return b"\x00" + hpack_int(len(n), 7, 0) + n + hpack_int(len(v), 7, 0) + v

    topic = "com." + "a" * (65536 - 4)
    # Both long fields in one block stay within its eight CONTINUATION frames.
    shapes = [(topic, ""), ("com.example.app", "v" * 65536), (topic[:60000], "w" * 65536)]
    statuses = []
    for k, (t, big) in enumerate(shapes):  # a connection and a device each (a token keeps its topic)
        s = h2_connect(case.server.http)
        r = H2Reader(s)
        sid = 1
        block = b"\x83\x86" + field(":path", "/3/device/" + f"{k:02x}" * 32) + field(":authority", "localhost")
        block += field("apns-topic", t) + field("authorization", "bearer " + jwt)
        if big:
            block += field("x-big", big)
        parts = [block[i:i + 16384] for i in range(0, len(block), 16384)]
        frames = frame(HEADERS, END_HEADERS if len(parts) == 1 else 0, sid, parts[0])
        for n, part in enumerate(parts[1:], 1):
            frames += frame(CONTINUATION, END_HEADERS if n == len(parts) - 1 else 0, sid, part)
        s.sendall(frames + frame(DATA, END_STREAM, sid, b'{"aps":{"alert":"hi"}}'))
        wait(lambda: len(r.statuses) >= 1 or r.closed, 10)
        statuses += r.statuses or [(r.rst, r.goaway)]
        s.close()
    case.check(statuses == [0x88] * len(shapes), f"every push answered 200 ({statuses})")
    status, body = http1(case.server.http, "GET", "/emulator/v1/notifications", timeout=10)
    kept = json.loads(body)["notifications"] if status == 200 else []
    case.check(len(kept) == len(shapes), f"the notification log kept all {len(shapes)} ({status}, {len(kept)})")
    lengths = sorted((len(n["topic"]), len(n["headers"].get("x-big", ""))) for n in kept)
    case.check(lengths == [(15, 65535), (60000, 65535), (65535, 0)], f"topics and headers cut to 65,535 bytes: {lengths}")


def stream_overrun(case):
    s = h2_connect(case.server.http)
    r = H2Reader(s)
    block = request_block("POST", "/emulator/v1/devices")
    s.sendall(b"".join(frame(HEADERS, END_HEADERS, sid, block) for sid in range(1, 2 * 1500, 2)))
    wait(lambda: r.closed or len(r.rst) > 0 or r.goaway is not None, 5)
    case.check(len(r.rst) > 0 or r.goaway is not None, f"streams past the limit refused ({len(r.rst)} resets, goaway={r.goaway is not None})")


def half_open_bodies(case):
    conns = []
    for _ in range(4):
        s = h2_connect(case.server.http)
        r = H2Reader(s)
        chunk = frame(DATA, 0, 0, b"")  # placeholder
        for sid in range(1, 2 * 250, 2):
            s.sendall(frame(HEADERS, END_HEADERS, sid, request_block("POST", "/iid/v1:batchAdd")))
        payload = b"z" * 16384
        data = b"".join(frame(DATA, 0, sid, payload) for sid in range(1, 2 * 250, 2))
        s.settimeout(0.5)
        t_end = time.time() + 3
        while time.time() < t_end:
            try:
                s.sendall(data)
            except (socket.timeout, OSError):
                break
        conns.append((s, r))
    rss = case.server.rss_mib()
    case.check(rss < case.rss_bound, f"RSS with 1,000 half-open streams holding bodies: {rss:.0f} MiB (< {case.rss_bound})")
    for s, _ in conns:
        s.close()


def zero_window_pages(case):
    status, body = http1(case.server.http, "POST", "/emulator/v1/fleets",
                         json.dumps({"platform": "ios", "app": "com.example.attack", "count": 100000}).encode())
    fleet = json.loads(body).get("id") if status == 201 else None
    if not case.check(fleet is not None, f"fleet created ({status})"):
        return
    s = h2_connect(case.server.http, window=0)
    r = H2Reader(s)
    path = f"/emulator/v1/fleets/{fleet}/tokens?limit=100000"
    s.sendall(b"".join(frame(HEADERS, END_HEADERS | END_STREAM, sid, request_block("GET", path)) for sid in range(1, 301, 2)))
    time.sleep(3)
    rss = case.server.rss_mib()
    case.check(rss < case.rss_bound, f"RSS with 150 unread 6.7 MB pages asked for: {rss:.0f} MiB (< {case.rss_bound})")
    case.check(len(r.rst) > 0, f"streams past the unsent-answer cap refused ({len(r.rst)} REFUSED_STREAM)")
    s.close()


def http1_abandoned_bodies(case):
    base = case.server.open_connections()
    for _ in range(50):
        s = socket.create_connection(("127.0.0.1", case.server.http), timeout=5)
        s.sendall(b"POST /iid/v1:batchAdd HTTP/1.1\r\nhost: x\r\ncontent-length: 1000000\r\n\r\n" + b"a" * 500000)
        s.close()
    ok = wait(lambda: case.server.open_connections() <= base + 1, 5)
    case.check(ok, f"50 abandoned bodies: open connections back to {case.server.open_connections()} (baseline {base})")


def http1_large_bodies(case):
    socks = []
    for _ in range(300):
        try:
            s = socket.create_connection(("127.0.0.1", case.server.http), timeout=5)
            s.sendall(b"POST /iid/v1:batchAdd HTTP/1.1\r\nhost: x\r\ncontent-length: 1048575\r\n\r\n" + b"a" * 1048574)
            socks.append(s)
        except OSError:
            pass
    time.sleep(0.5)
    rss = case.server.rss_mib()
    case.check(rss < case.rss_bound, f"RSS with 300 unfinished 1 MiB bodies: {rss:.0f} MiB (< {case.rss_bound})")
    status, _ = http1(case.server.http, "POST", "/iid/v1:batchAdd", b"{}", timeout=5)
    case.check(status in (503, 401, 400), f"a new request with a body while over budget gets an answer ({status})")
    for s in socks:
        s.close()


def slowloris(case):
    s = socket.create_connection(("127.0.0.1", case.server.http), timeout=10)
    start = time.time()
    closed_after = None
    for b in b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-slow: " + b"a" * 100:
        try:
            s.send(bytes([b]))
        except OSError:
            closed_after = time.time() - start
            break
        s.settimeout(0.4)
        try:
            if s.recv(1) == b"":
                closed_after = time.time() - start
                break
        except socket.timeout:
            pass
        except OSError:
            closed_after = time.time() - start
            break
        if time.time() - start > 8:
            break
    case.check(closed_after is not None and closed_after < 4.5,
               f"a head sent a byte at a time was closed {closed_after and round(closed_after, 1)} s after its start (--head-timeout 2)")


def http1_body_timeout(case):
    s = socket.create_connection(("127.0.0.1", case.server.http), timeout=10)
    start = time.time()
    s.sendall(b"POST /iid/v1:batchAdd HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\nabc")
    closed = wait_closed(s, 8)
    took = time.time() - start
    case.check(closed and took < 4.5, f"an unfinished body was closed after {took:.1f} s (--body-timeout 2)")


def h2_open_stream_timeout(case):
    s = h2_connect(case.server.http)
    r = H2Reader(s)
    start = time.time()
    s.sendall(frame(HEADERS, END_HEADERS, 1, request_block("POST", "/emulator/v1/devices")))
    wait(lambda: 1 in r.rst, 6)
    took = time.time() - start
    case.check(1 in r.rst and took < 4.5, f"a half-open stream was reset after {took:.1f} s (--body-timeout 2)")
    wait(lambda: r.closed, 6)
    took = time.time() - start
    case.check(r.closed and took < 8, f"then the idle connection was closed after {took:.1f} s (--idle-timeout 2)")


def zero_window_send_timeout(case):
    s = h2_connect(case.server.http, window=0)
    r = H2Reader(s)
    start = time.time()
    s.sendall(frame(HEADERS, END_HEADERS | END_STREAM, 1, request_block("GET", "/metrics")))
    wait(lambda: 1 in r.rst, 6)
    took = time.time() - start
    case.check(1 in r.rst and took < 4.5, f"an answer the client never took was reset after {took:.1f} s (--body-timeout 2)")


def connection_limit(case):
    idle = [socket.create_connection(("127.0.0.1", case.server.http), timeout=5) for _ in range(40)]
    kept = []
    for _ in range(5):  # idle keep-alive connections too, after an answer
        k = socket.create_connection(("127.0.0.1", case.server.http), timeout=5)
        k.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        k.recv(4096)
        kept.append(k)
    time.sleep(1.3)  # idle means idle for a second
    status, _ = http1(case.server.http, "POST", "/emulator/v1/devices",
                      b'{"platform":"ios","app":"com.example.limit"}', timeout=2)
    case.check(status == 201, f"at the limit with idle connections, the idlest is closed and a new client served ({status})")
    for s in idle + kept:
        s.close()
    # Every one of those given back before the busy ones arrive (a close the server has not yet
    # seen still holds a slot, and a busy newcomer would then be refused in its place).
    # The count includes the /metrics connection that reads it, which closes right after: a
    # moment more lets the server see that close too.
    wait(lambda: 0 <= case.server.open_connections() <= 1, 5)
    time.sleep(0.3)

    def busy_client():
        s = socket.create_connection(("127.0.0.1", case.server.http), timeout=5)
        s.sendall(b"POST /emulator/v1/devices HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{")
        return s

    busy = [busy_client() for _ in range(40)]
    time.sleep(0.3)
    # A busy client that arrived while a closing connection still held its slot was answered
    # 503 (correctly); it is replaced, so that the 40 slots are all held by busy clients.
    for _ in range(3):
        answered = [i for i, s in enumerate(busy) if select.select([s], [], [], 0)[0]]
        if not answered:
            break
        for i in answered:
            busy[i].close()
            busy[i] = busy_client()
        time.sleep(0.3)
    status, body = http1(case.server.http, "POST", "/emulator/v1/devices", b"{}", timeout=2)
    case.check(status == 503, f"at the limit with every connection busy, a new client is answered 503 ({status})")
    status, _ = http1(case.server.http, "GET", "/healthz", timeout=2)
    case.check(status == 200, f"and /healthz is still answered ({status})")
    for s in busy:
        s.close()
    ok = wait(lambda: case.server.open_connections() <= 3, 5)
    case.check(ok, f"connections given back ({case.server.open_connections()} open)")


def limit_flood(case):
    """Past --max-connections, a flood of newcomers (six times what the loops hold waiting):
    each is answered 503 (or served, when a slot frees) or reset (the oldest waiting one, for a
    newer), never closed unheard,
    and /healthz on a new connection is answered 200 throughout."""
    busy = []
    for _ in range(40):
        b = socket.create_connection(("127.0.0.1", case.server.http), timeout=5)
        b.sendall(b"POST /emulator/v1/devices HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{")
        busy.append(b)
    time.sleep(0.3)
    # Silent newcomers first (they hold their place for 5 s), more than both loops keep waiting.
    silent = [socket.create_connection(("127.0.0.1", case.server.http), timeout=5) for _ in range(800)]
    time.sleep(0.3)
    flood = []
    for _ in range(3000):
        try:
            f = socket.create_connection(("127.0.0.1", case.server.http), timeout=5)
            f.sendall(b"GET /emulator/v1/stats HTTP/1.1\r\nhost: x\r\n\r\n")
            flood.append(f)
        except OSError:
            pass
    worst = 0.0
    for _ in range(5):
        t0 = time.time()
        status, _ = http1(case.server.http, "GET", "/healthz", timeout=2)
        worst = max(worst, time.time() - t0)
        case.check(status == 200, f"/healthz answered during the flood ({status}, {(time.time() - t0) * 1000:.0f} ms)")
    outcomes = {"answered 503": 0, "served": 0, "reset": 0, "closed unheard": 0, "other": 0}
    others = []
    for f in flood:
        f.settimeout(6)
        try:
            data = f.recv(4096)
            if data.startswith(b"HTTP/1.1 503"):
                outcomes["answered 503"] += 1
            elif data.startswith(b"HTTP/1.1 "):
                # A slot freed meanwhile (a /healthz probe's connection closed): served, as it should be.
                outcomes["served"] += 1
            elif data:
                outcomes["other"] += 1
                others.append(repr(data[:40]))
            else:
                outcomes["closed unheard"] += 1
        except ConnectionResetError:
            outcomes["reset"] += 1
        except OSError as e:
            outcomes["other"] += 1
            others.append(repr(e))
        f.close()
    case.check(outcomes["closed unheard"] == 0 and outcomes["other"] == 0 and outcomes["answered 503"] > 0,
               f"{len(flood)} newcomers with a request: {outcomes}" + (f" (other: {others[:3]})" if others else ""))
    reset = 0
    for q in silent:
        q.settimeout(0.5)
        try:
            q.recv(1)
        except ConnectionResetError:
            reset += 1
        except OSError:
            pass
        q.close()
    case.check(reset >= 800 - 2 * 256, f"{reset} of 800 silent newcomers reset for newer ones (both loops keep 256 waiting)")
    for b in busy:
        b.close()


def tls_handshake_stalls(case):
    socks = []
    for i in range(200):
        s = socket.create_connection(("127.0.0.1", case.server.https), timeout=5)
        if i % 2:
            s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # the start of a ClientHello
        socks.append(s)
    time.sleep(1)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    start = time.time()
    with socket.create_connection(("127.0.0.1", case.server.https), timeout=2) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as t:
            t.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            data = t.recv(100)
    case.check(data.startswith(b"HTTP/1.1 200") and time.time() - start < 1,
               f"with 200 stalled TLS handshakes, a new TLS client is served in {time.time() - start:.2f} s")
    for s in socks:
        s.close()


MALFORMED = {
    "CL+TE": b"POST /emulator/v1/devices HTTP/1.1\r\nhost: x\r\ncontent-length: 4\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
    "duplicate CL": b"POST /emulator/v1/devices HTTP/1.1\r\nhost: x\r\ncontent-length: 4\r\ncontent-length: 5\r\n\r\nabcd",
    "chunk-size overflow": b"POST /emulator/v1/devices HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\nffffffffffffffffff1\r\n",
    "bare LF": b"GET /healthz HTTP/1.1\nhost: x\n\n",
    "obs-fold": b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-a: b\r\n c\r\n\r\n",
    "NUL": b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-a: b\x00c\r\n\r\n",
    "long chunk extension": b"POST /emulator/v1/devices HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n1;" + b"e" * 5000 + b"\r\n",
    "TE not chunked": b"POST /emulator/v1/devices HTTP/1.1\r\nhost: x\r\ntransfer-encoding: gzip\r\n\r\n",
    "space before colon": b"GET /healthz HTTP/1.1\r\nhost : x\r\n\r\n",
    "negative CL": b"POST /emulator/v1/devices HTTP/1.1\r\nhost: x\r\ncontent-length: -1\r\n\r\n",
    "huge CL": b"POST /emulator/v1/devices HTTP/1.1\r\nhost: x\r\ncontent-length: 99999999999999999999999\r\n\r\n",
}


def too_large_shapes(case):
    """A too-large body gets its route's own answer (413, or FCM's 400), never text/plain."""
    big = b"x" * 300_000
    status, body = http1(case.server.http, "POST", "/emulator/v1/faults", big)
    case.check(status == 413 and json.loads(body)["error"]["code"] == 413, f"admin route: 413 {body[:80]!r}")
    status, body = http1(case.server.http, "POST", "/token", big, headers={"content-type": "application/x-www-form-urlencoded"})
    case.check(status == 413 and "error" in json.loads(body), f"OAuth token route: 413 {body[:80]!r}")
    status, body = http1(case.server.http, "POST", "/v1/projects/p/messages:send", big)
    # FCM answers an oversized message 400 INVALID_ARGUMENT, as Google does (no 413).
    case.check(status == 400 and json.loads(body)["error"]["status"] == "INVALID_ARGUMENT", f"FCM send: {status} {body[:80]!r}")
    status, body = http1(case.server.http, "POST", "/3/device/" + "a" * 64, big)
    case.check(status == 413 and json.loads(body)["reason"] == "PayloadTooLarge", f"APNs push: 413 {body[:80]!r}")


def http1_malformed(case):
    for name, raw in MALFORMED.items():
        s = socket.create_connection(("127.0.0.1", case.server.http), timeout=3)
        s.sendall(raw)
        data = b""
        try:
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        except OSError:
            pass
        s.close()
        status = data.split(b" ", 2)[1] if data.startswith(b"HTTP/1.1 ") else b"none"
        case.check(status in (b"400", b"413", b"501"), f"{name}: {status.decode()} and closed")


def fuzzed_bodies(case):
    rng = random.Random(22)
    seeds = {
        "/emulator/v1/faults": b'{"match":{"provider":"apns","after":"5s"},"respond":{"status":429,"reason":"TooManyRequests"},"count":3}',
        "/emulator/v1/scenarios": b'{"name":"s","steps":[{"at":"1s","rule":{"respond":{"status":503}}}]}',
        "/emulator/v1/devices": b'{"platform":"ios","app":"com.example","behavior":{"receiveRate":0.5,"openRate":0.1,"openDelayMs":100}}',
        "/emulator/v1/fleets": b'{"platform":"android","app":"com.example","count":10,"seed":1}',
        "/v1/projects/demo/messages:send": b'{"message":{"token":"abc","notification":{"title":"t","body":"b"},"android":{"ttl":"10s"}}}',
        "/3/device/" + "a" * 64: b'{"aps":{"alert":{"title":"t","body":"b"},"badge":1}}',
        "/4/broadcasts/apps/com.example": b'{"aps":{"event":"update","timestamp":1700000000,"content-state":{"x":1}}}',
        "/1/apps/com.example/channels": b'{"message-storage-policy":1,"push-type":"LiveActivity"}',
        "/iid/v1:batchAdd": b'{"to":"/topics/news","registration_tokens":["a","b"]}',
        "/token": b'grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=a.b.c',
        "/emulator/v1/devices/" + "b" * 64 + "/activities": b'{"attributesType":"T","contentState":{"a":1},"staleDate":1e300}',
        "/emulator/v1/devices/" + "c" * 64 + "/push-to-start": b'{"attributesType":"T"}',
        "/emulator/v1/apns/keys": b'{"teamId":"TEAM123456","keyId":"KEY1234567","environment":"sandbox","topics":["a"]}',
    }
    specials = [b"1e300", b"-1e300", b"9223372036854775807", b"99999999999999999999", b"NaN", b"\"99999999999999999999s\"",
                b"null", b"[]", b"{}", b"\"\\ud800\"", b"-0", b"1e-400", b"\"\x00\"", b"[" * 200]
    jwt = provider_token(case.server.binary)
    bad5xx = 0
    for i in range(3000):
        path, seed = rng.choice(list(seeds.items()))
        body = bytearray(seed)
        for _ in range(rng.randint(1, 4)):
            op = rng.random()
            pos = rng.randrange(len(body) + 1)
            if op < 0.3:
                body[pos:pos] = rng.choice(specials)
            elif op < 0.5 and body:
                del body[pos:pos + rng.randint(1, 8)]
            elif op < 0.7:
                body[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 6)))
            else:
                m = re.search(rb"\d+(\.\d+)?", bytes(body[pos:]))
                if m:
                    s, e = pos + m.start(), pos + m.end()
                    body[s:e] = rng.choice(specials)
        try:
            auth = "bearer " + jwt if path.startswith(("/3/", "/4/", "/1/")) else "Bearer ya29.fuzz"
            headers = {"content-type": "application/json", "authorization": auth, "apns-topic": "com.example",
                       "apns-push-type": rng.choice(["alert", "background", "liveactivity", "voip", "bogus"]),
                       "apns-expiration": rng.choice(["0", "1e300", "99999999999999999999", "-1", "1700000000"]),
                       "apns-priority": rng.choice(["10", "5", "1", "99999999999999999999"]),
                       "apns-channel-id": rng.choice(["dHVuZWQ=", "%%%", ""])}
            if path == "/token":
                headers["content-type"] = "application/x-www-form-urlencoded"
            status, _ = http1(case.server.http, "POST", path, bytes(body), headers=headers, timeout=5)
        except OSError as e:
            case.check(False, f"fuzz #{i} on {path}: {e}")
            break
        if status >= 500 and status != 503:
            bad5xx += 1
        if not case.server.alive():
            case.check(False, f"fuzz #{i} on {path} killed the process: {bytes(body)[:200]!r}")
            return
    case.check(bad5xx == 0, f"3,000 fuzzed admin and provider bodies and headers: no 500 ({bad5xx})")
    # Query strings and path segments with hostile numbers and bytes.
    queries = ["/emulator/v1/notifications?limit={}", "/emulator/v1/notifications?wait={}", "/emulator/v1/tracking?limit={}&wait={}",
               "/emulator/v1/devices?limit={}", "/emulator/v1/fleets/fleet-1/tokens?offset={}&limit={}",
               "/emulator/v1/report?since={}", "/emulator/v1/devices/{}/notifications?wait={}", "/iid/info/{}?details=true"]
    values = ["1e300", "-1", "9223372036854775807", "99999999999999999999", "NaN", "%00", "%ff%fe", "0x10", "", "3.5", "-0",
              "99999999999999999999s", "%2e%2e%2f"]
    bad = 0
    for i in range(300):
        q = rng.choice(queries)
        path = q.format(*[rng.choice(values) for _ in range(q.count("{}"))])
        try:
            status, _ = http1(case.server.http, "GET", path, timeout=5)
        except OSError as e:
            case.check(False, f"query {path}: {e}")
            return
        if status >= 500 and status != 503 or not case.server.alive():
            bad += 1
            case.lines.append(f"     {path} -> {status}")
        if not case.server.alive():
            break
    case.check(bad == 0, f"300 hostile query strings: no 500 and no crash ({bad})")


def h2_frame_fuzz(case):
    """Random frames (types, flags, stream ids, lengths, payloads) on 300 h2c connections."""
    rng = random.Random(2222)
    for n in range(300):
        try:
            s = h2_connect(case.server.http)
        except OSError as e:
            case.check(False, f"connection {n}: {e}")
            return
        out = b""
        for _ in range(rng.randint(1, 30)):
            t = rng.choice([DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE,
                            CONTINUATION, 10, 0xFF])
            payload = bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 4, 5, 8, 9, 30, 200])))
            if t == HEADERS and rng.random() < 0.5:
                payload = request_block(rng.choice(["GET", "POST"]), rng.choice(["/healthz", "/3/device/ab", "/x"])) + payload[:10]
            out += frame(t, rng.randrange(256), rng.choice([0, 1, 2, 3, 5, 0x7FFFFFFF]), payload)
        try:
            s.sendall(out)
            s.settimeout(0.05)
            s.recv(65536)
        except OSError:
            pass
        s.close()
        if not case.server.alive():
            case.check(False, f"connection {n} killed the process")
            return
    case.check(True, "300 connections of random frames")


def service_account_flood(case):
    stop = time.time() + 3
    def flood():
        while time.time() < stop:
            try:
                http1(case.server.http, "POST", "/emulator/v1/fcm/service-accounts", b'{"projectId":"p"}', timeout=5)
            except OSError:
                pass
    threads = [threading.Thread(target=flood) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def threads_of(server):
    for line in open(f"/proc/{server.proc.pid}/status"):
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return -1


def admin_flood(case):
    """Admin requests from eight clients at once, past --admin-rate 500: 429s, and the loops stay free."""
    statuses = {}
    peak_threads = [threads_of(case.server)]
    stop = time.time() + 3
    lock = threading.Lock()

    def flood(path):
        while time.time() < stop:
            try:
                st, _ = http1(case.server.http, "GET", path, timeout=5)
            except OSError:
                st = 0
            with lock:
                statuses[st] = statuses.get(st, 0) + 1
            peak_threads[0] = max(peak_threads[0], threads_of(case.server))

    paths = ["/emulator/v1/devices", "/emulator/v1/report", "/emulator/v1/notifications?limit=10000", "/emulator/v1/stats"] * 2
    workers = [threading.Thread(target=flood, args=(p,)) for p in paths]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    case.check(statuses.get(429, 0) > 0, f"admin requests past the rate got 429 ({statuses})")
    case.check(0 not in statuses, "every admin request was answered")
    case.check(peak_threads[0] < 30, f"reports ran on the journal-read worker, not a thread each ({peak_threads[0]} threads at most)")


def rebinding(case):
    """A DNS-rebinding page (Host: evil.example, a same-origin Origin) is refused on every route:
    admin, dashboard, FCM sends, Instance ID, OAuth, APNs pushes and channels. The real services'
    host names (the proxy's, --resolve's) and requests without browser headers pass."""
    port = case.server.http
    evil = {"host": f"evil.example:{port}", "origin": f"http://evil.example:{port}", "sec-fetch-site": "same-origin",
            "content-type": "application/json", "authorization": "Bearer ya29.rebinding"}
    token = "e" * 20 + ":APA91b" + "x" * 140
    routes = [
        ("GET", "/emulator/v1/devices", b""),
        ("POST", "/emulator/v1/faults", b'{"match":{},"effect":{"status":500}}'),
        ("GET", "/", b""),
        ("POST", "/v1/projects/demo/messages:send", json.dumps({"message": {"token": token, "data": {"a": "b"}}}).encode()),
        ("POST", "/iid/v1:batchAdd", json.dumps({"to": "/topics/news", "registration_tokens": [token]}).encode()),
        ("GET", "/iid/info/" + token + "?details=true", b""),
        ("POST", "/token", b"grant_type=x&assertion=a.b.c"),
        ("POST", "/fcm/send", b'{"to":"x"}'),
        ("POST", "/3/device/" + "ab" * 32, b'{"aps":{"alert":"x"}}'),
        ("POST", "/1/apps/com.example/channels", b'{"message-storage-policy":0,"push-type":"LiveActivity"}'),
    ]
    refused = []
    for method, path, body in routes:
        status, answer = http1(port, method, path, body, headers=evil)
        refused.append((path.split("?")[0][:40], status))
        case.check(status == 403, f"{method} {path[:50]} from a rebinding page: {status} {answer[:100]!r}")
    # The same send from a tool (no browser headers) goes through; so does a browser request under
    # the service's own name (the proxy's and --resolve's), same-origin.
    plain = {k: v for k, v in evil.items() if k in ("content-type", "authorization")}
    status, _ = http1(port, "POST", "/v1/projects/demo/messages:send", routes[3][2], headers={**plain, "host": f"evil.example:{port}"})
    case.check(status == 200, f"the same send without browser headers: {status}")
    named = {**plain, "host": "fcm.googleapis.com", "origin": "https://fcm.googleapis.com", "sec-fetch-site": "same-origin"}
    status, _ = http1(port, "POST", "/v1/projects/demo/messages:send", routes[3][2], headers=named)
    case.check(status == 200, f"a same-origin browser request under fcm.googleapis.com: {status}")
    cross = {**named, "origin": "https://evil.example", "sec-fetch-site": "cross-site"}
    status, _ = http1(port, "POST", "/v1/projects/demo/messages:send", routes[3][2], headers=cross)
    case.check(status == 403, f"a cross-site send under fcm.googleapis.com: {status}")


def admin_rate(case):
    """--admin-rate 100 on two loops is one budget for the process: one connection gets the
    whole rate, four connections share it (about 100 a second after a second's burst)."""
    import http.client

    def hammer(seconds, connections):
        counts = {"ok": 0, "limited": 0}
        lock = threading.Lock()
        stop = time.time() + seconds

        def one():
            c = http.client.HTTPConnection("127.0.0.1", case.server.http, timeout=5)
            while time.time() < stop:
                c.request("GET", "/emulator/v1/stats")
                r = c.getresponse()
                r.read()
                with lock:
                    counts["ok" if r.status == 200 else "limited"] += 1
            c.close()

        workers = [threading.Thread(target=one) for _ in range(connections)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        return counts

    one = hammer(3, 1)
    case.check(250 <= one["ok"] <= 420 and one["limited"] > 0,
               f"one connection for 3 s: {one['ok']} answered (a burst of 100, then 100 a second), {one['limited']} limited")
    time.sleep(1.2)
    four = hammer(3, 4)
    case.check(250 <= four["ok"] <= 420, f"four connections for 3 s: {four['ok']} answered in all ({four['limited']} limited)")
    status, body = http1(case.server.http, "GET", "/emulator/v1/stats")
    case.check(status in (200, 429) and (status == 200 or b"100 admin requests" in body), f"the 429 names the rate ({status})")


def channel_fill(case):
    """APNs broadcast channels filling 20 apps to their 10,000 each (h2load on the channel API):
    creation as fast in a full app as in an empty one, and /healthz on a new connection quick
    throughout (creating never holds the registry's lock, which broadcasts take, for long)."""
    jwt = provider_token(case.server.binary)
    body = tempfile.NamedTemporaryFile(prefix="pushemu-attack-", suffix=".json", delete=False)
    body.write(b'{"message-storage-policy":1,"push-type":"LiveActivity"}')
    body.close()
    latencies = []
    stop = threading.Event()

    def probe():
        while not stop.is_set():
            t0 = time.time()
            try:
                http1(case.server.http, "GET", "/healthz", timeout=2)
                latencies.append(time.time() - t0)
            except OSError:
                latencies.append(2.0)
            time.sleep(0.02)

    prober = threading.Thread(target=probe)
    prober.start()
    rates = []
    try:
        for app in range(20):
            out = subprocess.run(["h2load", "-n", "10000", "-c", "4", "-m", "16", "-t", "1", "-d", body.name,
                                  "-H", "authorization: bearer " + jwt,
                                  "-H", ":authority: api-manage-broadcast.sandbox.push.apple.com",
                                  f"http://127.0.0.1:{case.server.http}/1/apps/com.example.fill{app}/channels"],
                                 capture_output=True, text=True, timeout=120).stdout
            m = re.search(r"finished in [\d.]+m?s, ([\d.]+) req/s", out)
            codes = re.search(r"status codes: (\d+) 2xx", out)
            if not m or not codes or int(codes.group(1)) != 10000:
                raise RuntimeError("h2load: " + out[-500:])
            rates.append(float(m.group(1)))
    finally:
        stop.set()
        prober.join()
        os.unlink(body.name)
    case.check(min(rates[-3:]) >= 0.5 * max(rates[:3]),
               "channels a second, first apps %s, last apps %s (filling 20 apps to 10,000 each)"
               % ([round(r) for r in rates[:3]], [round(r) for r in rates[-3:]]))
    latencies.sort()
    case.check(latencies[-1] < 0.1, "/healthz during the fill: p50 %.1f ms, max %.1f ms (%d probes)"
               % (latencies[len(latencies) // 2] * 1000, latencies[-1] * 1000, len(latencies)))
    status, body_ = http1(case.server.http, "GET", "/emulator/v1/stats")
    case.check(b'"channels":200000' in body_, f"200,000 channels held ({body_[body_.find(b'apns'):][:40]!r})")
    status, _ = http1(case.server.http, "POST", "/emulator/v1/reset", b"")
    case.check(status == 200, f"reset forgets them ({status})")


def connection_memory(case):
    """Idle TLS connections count in --max-memory (32 MiB here: about 740 at 44 KiB each):
    past it newcomers get the answer past the limit, RSS stays bounded, and after five bursts
    of 1,200 connections closed, RSS does not grow from burst to burst and comes back near the
    baseline (within 20%, or 6 MiB: what the loops' malloc arenas keep)."""
    ctx = ssl.create_default_context(cafile=os.path.join(os.path.dirname(__file__), "..", "..", "Certs", "ca.pem"))
    ctx.set_alpn_protocols(["h2"])
    preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0)
    # The baseline after a few handshakes: the TLS code paged in is not memory held.
    for _ in range(3):
        ctx.wrap_socket(socket.create_connection(("127.0.0.1", case.server.https), timeout=5), server_hostname="localhost").close()
    time.sleep(0.5)
    baseline = case.server.rss_mib()
    peaks = []
    for burst in range(5):
        held = []
        for _ in range(1200):
            try:
                s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", case.server.https), timeout=5), server_hostname="localhost")
                s.sendall(preface)
                held.append(s)
            except (OSError, ssl.SSLError):
                pass
        time.sleep(1.0)
        peaks.append(case.server.rss_mib())
        if burst == 0:
            status, _ = http1(case.server.http, "POST", "/emulator/v1/devices", b'{"platform":"ios","app":"com.example.mem"}', timeout=5)
            case.check(status in (201, 503), f"a new client past the budget is answered ({status})")
        for s in held:
            try:
                s.close()
            except OSError:
                pass
        time.sleep(0.5)
    case.check(max(peaks) < baseline + 32 + 30, "RSS with 1,200 TLS connections held: %s MiB (baseline %.0f, budget 32 MiB)"
               % ([round(p) for p in peaks], baseline))
    # No leak across bursts: the last burst holds no more than the first two did.
    case.check(peaks[-1] <= max(peaks[:2]) + 8, "RSS does not grow from burst to burst: %s MiB" % [round(p) for p in peaks])
    # Back near the baseline once closed. What stays is the event loops' malloc arenas, which
    # keep partly used pages after 6,000 handshakes (measured: 3.5-5 MiB of anonymous memory
    # in the loops' arenas, none in the main heap or the libraries): 6 MiB or 20% allowed.
    limit = baseline + max(6, baseline * 0.2)
    deadline = time.time() + 8
    after = case.server.rss_mib()
    while time.time() < deadline and after > limit:
        time.sleep(0.25)
        after = case.server.rss_mib()
    case.check(after <= limit, f"RSS after five bursts closed: {after:.1f} MiB (baseline {baseline:.1f}, limit {limit:.1f})")


def state_memory(case):
    """Stored state is bounded by memory (--max-state-memory 16MiB here): Instance ID
    subscriptions of new tokens are refused 429 RESOURCE_EXHAUSTED once the state's measured
    cost reaches it, device records 507, a push to a new token still answered 200 (delivered
    without a record); RSS follows the budget; a reset gives it back."""
    port = case.server.http
    baseline = case.server.rss_mib()
    tok = lambda i: "e%021d:APA91b" % i + ("T%05d" % (i % 100000)) * 23 + "xx"
    added = 0
    refused = None
    for b in range(0, 100_000, 1000):
        status, body = http1(port, "POST", "/iid/v1:batchAdd",
                             json.dumps({"to": "/topics/news", "registration_tokens": [tok(i) for i in range(b, b + 1000)]}).encode(),
                             headers={"content-type": "application/json", "authorization": "Bearer ya29.state"}, timeout=30)
        results = json.loads(body).get("results", []) if status == 200 else []
        added += sum(1 for r in results if r == {})
        if status != 200 or any(r.get("error") for r in results):
            refused = (status, [r for r in results if r.get("error")][:1] or body[:100])
            break
    case.check(refused is not None and "RESOURCE_EXHAUSTED" in str(refused[1]),
               f"subscriptions of new tokens refused per token past the budget, after {added}: {refused}")
    case.check(14_000 <= added <= 18_000, f"{added} tokens with a subscription in 16 MiB (1,040 B each)")
    for _ in range(100):
        status, body = http1(port, "POST", "/emulator/v1/devices", b'{"platform":"ios","app":"com.example.state"}')
        if status != 201:
            break
    case.check(status == 507 and b"max-state-memory" in body, f"device records past it: {status} {body[:120]!r}")
    status, body = http1(port, "GET", "/emulator/v1/stats")
    used = json.loads(body)["stateMemory"]
    case.check(used["usedBytes"] <= used["limitBytes"] == 16 << 20, f"stateMemory {used}")
    grown = case.server.rss_mib() - baseline
    case.check(grown < 16 * 1.5 + 16, f"RSS grew {grown:.0f} MiB for a 16 MiB state budget")
    status, _ = http1(port, "POST", "/emulator/v1/reset", b"")
    status, body = http1(port, "POST", "/emulator/v1/devices", b'{"platform":"ios","app":"com.example.state"}')
    case.check(status == 201, f"after a reset, a device record is kept again ({status})")


def h2load_pushes(port, jwt, requests=20000):
    """APNs pushes from h2load (4 connections, 16 streams each), every one answered 2xx: the
    req/s it reports."""
    payload = tempfile.NamedTemporaryFile(prefix="pushemu-attack-", suffix=".json", delete=False)
    payload.write(b'{"aps":{"alert":"rule scale"}}')
    payload.close()
    try:
        out = subprocess.run(["h2load", "-n", str(requests), "-c", "4", "-m", "16", "-t", "1", "-d", payload.name,
                              "-H", "authorization: bearer " + jwt, "-H", "apns-topic: com.example.app",
                              "-H", "apns-push-type: alert", f"http://127.0.0.1:{port}/3/device/{'ab' * 32}"],
                             capture_output=True, text=True, timeout=300).stdout
    finally:
        os.unlink(payload.name)
    m = re.search(r"finished in [\d.]+m?s, ([\d.]+) req/s", out)
    ok = re.search(r"status codes: (\d+) 2xx", out)
    if not m or not ok or int(ok.group(1)) != requests:
        raise RuntimeError("h2load: " + out[-600:])
    return float(m.group(1))


def server_cpu_seconds(server):
    """User plus system CPU time the server has used (from /proc, in clock ticks)."""
    fields = open(f"/proc/{server.proc.pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def add_path_rules(port, count, batch=1000):
    """`count` APNs rules, each for another device's path (none of them h2load_pushes's)."""
    for b in range(0, count, batch):
        rules = [{"match": {"provider": "apns", "path": "/3/device/%064x" % (b + i)}, "effect": {"status": 500}}
                 for i in range(min(batch, count - b))]
        status, body = http1(port, "POST", "/emulator/v1/faults", json.dumps(rules).encode(),
                             headers={"content-type": "application/json"}, timeout=300)
        if status != 201:
            raise RuntimeError(f"adding rules: {status} {body[:200]}")


def settle_rules(server, port, jwt):
    """Past 2,000 rules the loops' rule index is built on a thread of its own, started by the
    first request after a change, and a loop lets go of a replaced index at its next request:
    a few requests, then a wait until the server is idle, so that what follows is pushes with
    the rules in force, not that build."""
    h2load_pushes(port, jwt, requests=1000)
    deadline = time.time() + 60
    while time.time() < deadline:  # until the server is idle (under a tick in 0.2 s)
        before = server_cpu_seconds(server)
        time.sleep(0.2)
        if server_cpu_seconds(server) - before < 0.015:
            break
    h2load_pushes(port, jwt, requests=1000)


def fault_rule_scale(case):
    """100,000 rules aimed at other paths: pushes are answered as if there were none, the
    100,001st rule is refused with a 400 that says the bound, the rules' memory comes back
    once they are deleted (two rounds), and a push costs the event loop about as many
    instructions as with no rule (the index finds no candidate). The cost is counted by
    callgrind on a second server, in instructions: deterministic, where the CPU time of a
    2-CPU host shared with h2load swung by a third between rounds and failed a CI run."""
    jwt = provider_token(case.server.binary)
    port = case.server.http
    for round in range(2):
        add_path_rules(port, 100_000)
        if round == 0:
            status, body = http1(port, "POST", "/emulator/v1/faults",
                                 b'{"match":{"path":"/x"},"effect":{"status":500}}', timeout=30)
            case.check(status == 400 and b"at most 100000 fault rules" in body,
                       f"the 100,001st rule refused with a 400 naming the bound ({status} {body[:120]!r})")
        settle_rules(case.server, port, jwt)
        try:
            h2load_pushes(port, jwt, requests=20_000)
            answered = "all answered 200"
        except RuntimeError as e:
            answered = str(e)
        case.check(answered == "all answered 200",
                   f"round {round + 1}: 20,000 pushes with 100,000 rules aimed elsewhere: {answered}")
        status, _ = http1(port, "DELETE", "/emulator/v1/faults", timeout=60)
        if status != 200:
            raise RuntimeError(f"deleting rules: {status}")
    # Each loop lets go of the deleted rules' snapshot at its next request.
    h2load_pushes(port, jwt, requests=100)

    # The cost, by callgrind: instructions on the event loop per push, before and after.
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        case.check(False, "valgrind is not installed (apt-get install valgrind; Scripts/install-deps does)")
        return
    # An unoptimised build, ten times slower under callgrind, is counted with fewer rules (the
    # same index: each bucket past 1,024 keys has its Bloom filter) and pushes.
    debug = "/debug/" in os.path.realpath(case.server.binary)
    rules, pushes = (20_000, 2000) if debug else (100_000, 5000)
    bound = 0.85
    work = tempfile.mkdtemp(prefix="pushemu-callgrind-")
    try:
        binary = os.path.join(work, "pushemu")
        shutil.copy(case.server.binary, binary)
        # Valgrind 3.19 cannot read the ThinLTO binary's DWARF 5.
        subprocess.run(["strip", "-g", binary], check=True, timeout=60)
        server = Server(binary, ["--threads", "1", "--journal-max-records", "20000"],
                        wrapper=["valgrind", "--tool=callgrind", "--separate-threads=yes",
                                 "--callgrind-out-file=" + os.path.join(work, "cg.out")])
        try:
            pid = str(server.proc.pid)

            def counted(dump):
                """Instructions on the event loop (the thread that ran nghttp2's receive path)
                over `pushes` pushes, in callgrind's dump number `dump`."""
                subprocess.run(["callgrind_control", "-z", pid], capture_output=True, timeout=60, check=True)
                h2load_pushes(server.http, jwt, requests=pushes)
                subprocess.run(["callgrind_control", "-d", pid], capture_output=True, timeout=60, check=True)
                best = 0
                for f in glob.glob(os.path.join(work, f"cg.out.{dump}-*")):
                    text = open(f, errors="replace").read()
                    if "nghttp2_session_mem_recv" in text:
                        for line in text.splitlines():
                            if line.startswith("summary:"):
                                best = max(best, int(line.split()[1]))
                if best == 0:
                    raise RuntimeError(f"no callgrind dump of the event loop in {sorted(os.listdir(work))}")
                return best / pushes

            h2load_pushes(server.http, jwt, requests=1000)
            none = counted(1)
            add_path_rules(server.http, rules)
            settle_rules(server, server.http, jwt)
            many = counted(2)
        finally:
            server.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    case.check(none / many >= bound, "a push with {:,} rules aimed elsewhere costs the event loop {:,.0f} instructions, "
               "{:.2f}x the {:,.0f} of one with none (callgrind, {:,} pushes each; at most {:.2f}x)"
               .format(rules, many, many / none, none, pushes, 1 / bound))


def wait(predicate, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def wait_closed(sock, seconds):
    sock.settimeout(seconds)
    try:
        while True:
            if sock.recv(4096) == b"":
                return True
    except socket.timeout:
        return False
    except OSError:
        return True


def lit_long(name, value):
    """HPACK literal without indexing, new name, any length."""
    n, v = name.encode(), value.encode()
    return b"\x00" + hpack_int(len(n), 7, 0) + n + hpack_int(len(v), 7, 0) + v


class PushClient(threading.Thread):
    """Sends APNs pushes with apns-ids of its own over one h2c connection, 32 in flight, and
    keeps the ids answered 200 (status 200 is HPACK static index 8: first byte 0x88)."""

    def __init__(self, port, jwt, seed):
        super().__init__(daemon=True)
        self.port, self.jwt, self.seed = port, jwt, seed
        self.acked = []
        self.stop = False
        self.error = None

    def run(self):
        try:
            s = h2_connect(self.port)
        except OSError:
            return
        s.settimeout(5)
        inflight = {}
        sid = 1
        buf = b""
        token = "ab" * 32
        payload = b'{"aps":{"alert":"durable"}}'
        window = 1  # one stream until the token is accepted (APNs), then more
        n = 0
        settings_seen = False
        try:
            while not self.stop:
                while len(inflight) < window:
                    apns_id = "%08x-0000-4000-8000-%012x" % (self.seed, n)
                    n += 1
                    block = (b"\x83\x86" + lit(0x04, "/3/device/" + token) + lit(0x01, "localhost")
                             + lit_long("apns-topic", "com.example.app") + lit_long("apns-id", apns_id)
                             + lit_long("authorization", "bearer " + self.jwt))
                    s.sendall(frame(HEADERS, END_HEADERS, sid, block) + frame(DATA, END_STREAM, sid, payload))
                    inflight[sid] = apns_id
                    sid += 2
                chunk = s.recv(65536)
                if not chunk:
                    return
                buf += chunk
                frames, buf = split_frames(buf)
                for t, fl, fsid, pl in frames:
                    if t == HEADERS and fsid in inflight:
                        if pl[:1] == b"\x88":
                            self.acked.append(inflight[fsid])
                        if fl & END_STREAM:
                            del inflight[fsid]
                    elif t == DATA and fl & END_STREAM and fsid in inflight:
                        del inflight[fsid]
                    elif t == GOAWAY:
                        self.error = "GOAWAY %r" % pl
                    elif t == RST_STREAM and fsid in inflight:
                        del inflight[fsid]
                    elif t == SETTINGS and not fl & 1:
                        # The stream limit the server grants (1 until a token is accepted).
                        for k in range(0, len(pl) - 5, 6):
                            ident, value = struct.unpack(">HI", pl[k:k + 6])
                            if ident == 3:
                                window = max(1, min(32, value))
                        if settings_seen:  # h2_connect acknowledged the first one already
                            s.sendall(frame(SETTINGS, 1, 0))
                        settings_seen = True
        except OSError as e:
            self.error = e
            return


def provider_token(binary):
    """A provider token signed by a key `pushemu credentials apns` made (lenient auth accepts it)."""
    work = tempfile.mkdtemp(prefix="pushemu-jwt-")
    try:
        subprocess.run([binary, "credentials", "apns", "--out", work, "--data-dir", work + "/k", "--team-id", "TEAM123456",
                        "--key-id", "KEY1234567"], check=True, capture_output=True, timeout=30)
        return subprocess.run([binary, "token", "apns", "--key", work + "/AuthKey_KEY1234567.p8", "--key-id", "KEY1234567",
                               "--team-id", "TEAM123456"], check=True, capture_output=True, text=True, timeout=30).stdout.strip()
    finally:
        subprocess.run(["rm", "-rf", work])


def fd_limit(binary):
    """Under an open-file limit of 1,024 with the default --max-connections 10,000: a warning
    at start that names the limit and what is taken instead, and a flood of 1,500 connections
    leaves /healthz on a new connection answered at once (accepting never stalls on EMFILE)."""
    server = Server(binary, ["--threads", "2"], wrapper=["prlimit", "--nofile=1024:1024"])
    case = Case("fd-limit", server, 0)
    try:
        err = server.stderr()
        case.check("the open-file limit is 1024" in err and "at most 480 connections are taken" in err,
                   "warned at start: " + (err.strip().splitlines() or ["nothing"])[0][:200])
        held = []
        for _ in range(1500):
            try:
                held.append(socket.create_connection(("127.0.0.1", server.http), timeout=2))
            except OSError:
                break
        time.sleep(0.5)
        worst = 0.0
        ok = 0
        for _ in range(10):
            t0 = time.time()
            try:
                status, _ = http1(server.http, "GET", "/healthz", timeout=2)
                ok += status == 200
            except OSError:
                pass
            worst = max(worst, time.time() - t0)
        case.check(ok == 10 and worst < 1.0, f"/healthz with {len(held)} connections open: {ok} of 10 answered, worst {worst * 1000:.0f} ms")
        for h in held:
            h.close()
        case.check(server.alive(), "the process is alive")
    finally:
        server.stop()
    return case


def journal_full(binary):
    """A disk that fills under --durability strict, through the write-ahead files: pushes are
    answered 503 (not acknowledged), and it is visible: a stderr line with the error,
    pushemu_journal_failed_commits_total and pushemu_journal_failing in /metrics, /healthz 503
    naming the journal; freeing space brings 200s and a healthy /healthz back, no restart.
    The data directory is a 8 MiB tmpfs (in a mount namespace of its own), 6 MiB taken by a file."""
    case = Case("journal-full", None, 0)
    work = tempfile.mkdtemp(prefix="pushemu-full-")
    data = work + "/data"
    os.mkdir(data)
    out, err = work + "/out", work + "/err"
    script = (f"mount -t tmpfs -o size=8m tmpfs {data} && dd if=/dev/zero of={data}/filler bs=1M count=6 status=none && "
              f"exec {binary} serve --http-port 0 --https-port 0 --data-dir {data} --durability strict --threads 1")
    proc = subprocess.Popen(["unshare", "-r", "-m", "sh", "-c", script], stdout=open(out, "w"), stderr=open(err, "w"))
    try:
        port = None
        for _ in range(200):
            m = re.search(r"http=[^ ]*:(\d+)", open(out).read())
            if m:
                port = int(m.group(1))
                break
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        if not case.check(port is not None, "started on a tmpfs data directory: " + open(err).read()[-300:]):
            return case
        jwt = provider_token(binary)
        body = json.dumps({"aps": {"alert": "x" * 2000}}).encode()

        def push(i):
            st, _ = http2_push(port, jwt, "%064x" % i, body)
            return st

        statuses = {}
        for i in range(3000):
            st = push(i)
            statuses[st] = statuses.get(st, 0) + 1
            if statuses.get(503, 0) >= 20:
                break
        case.check(statuses.get(503, 0) >= 20 and statuses.get(200, 0) > 0,
                   f"pushes answered 200 until the disk filled, then 503 ({statuses})")
        text = open(err).read()
        said = [l for l in text.splitlines() if "journal" in l]
        first = said[0] if said else "stderr says nothing of the journal"
        case.check(("journal write-ahead failed" in first and "No space left on device" in first)
                   or ("journal commit failed" in first and "disk is full" in first),
                   "stderr says so (the write-ahead file or SQLite, whichever the disk refused first), with the error: " + first[:220])
        case.check(len(said) <= 5, f"at most once a second on stderr ({len(said)} line(s))")
        _, metrics = http1(port, "GET", "/metrics")
        failed = re.search(rb"^pushemu_journal_failed_commits_total (\d+)", metrics, re.M)
        failing = re.search(rb"^pushemu_journal_failing (\d+)", metrics, re.M)
        case.check(failed and int(failed.group(1)) > 0 and failing and failing.group(1) == b"1",
                   f"/metrics: failed commits {failed and failed.group(1)}, failing {failing and failing.group(1)}")
        st, health = http1(port, "GET", "/healthz")
        case.check(st == 503 and b'"journal":{"failing":true' in health, f"/healthz: {st} {health[:160]!r}")
        # Room again: the next pushes are stored and acknowledged, /healthz is ok.
        os.unlink(f"/proc/{proc.pid}/root{data}/filler")
        recovered = False
        deadline = time.time() + 10
        i = 10000
        while time.time() < deadline:
            i += 1
            if push(i) == 200:
                recovered = True
                break
            time.sleep(0.05)
        case.check(recovered, "a push is acknowledged again once there is room")
        healthy = False
        while time.time() < deadline:
            st, health = http1(port, "GET", "/healthz")
            if st == 200:
                healthy = True
                break
            push(i := i + 1)
            time.sleep(0.1)
        case.check(healthy, f"/healthz ok again ({st} {health[:120]!r})")
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        subprocess.run(["rm", "-rf", work])
    return case


def http2_push(port, jwt, token, body):
    """One APNs push over h2c with curl: (status, body)."""
    r = subprocess.run(["curl", "-s", "--http2-prior-knowledge", "--max-time", "10", "-w", "\n%{http_code}",
                        "-H", "authorization: bearer " + jwt, "-H", "apns-topic: com.example.app",
                        "--data-binary", "@-", f"http://127.0.0.1:{port}/3/device/{token}"],
                       input=body, capture_output=True, timeout=20)
    text = r.stdout.rsplit(b"\n", 1)
    return int(text[-1] or 0), text[0]


def kill_nine_three_times(binary):
    """kill -9 under load, three times in a row on one data directory: every apns-id a client
    got a 200 for is in `pushemu export` afterwards."""
    case = Case("kill-nine-three-times", None, 0)
    work = tempfile.mkdtemp(prefix="pushemu-kill9-")
    data = work + "/data"
    jwt = provider_token(binary)
    acked = []
    for round in range(3):
        server = Server(binary, ["--in-memory=false", "--data-dir", data, "--durability", "strict", "--threads", "2"])
        clients = [PushClient(server.http, jwt, round * 16 + k) for k in range(4)]
        for c in clients:
            c.start()
        time.sleep(1.5)
        server.proc.kill()
        server.proc.wait()
        for c in clients:
            c.stop = True
            c.join(5)
        got = sum(len(c.acked) for c in clients)
        case.check(got > 500, f"round {round + 1}: {got} pushes answered 200 before kill -9")
        acked += [i for c in clients for i in c.acked]
        server.stop()
    export = subprocess.run([binary, "export", "--data-dir", data], capture_output=True, text=True, timeout=120)
    stored = set(re.findall(r'"notificationId":"([0-9a-fA-F-]{36})"', export.stdout))
    stored = {i.lower() for i in stored}
    missing = [i for i in acked if i.lower() not in stored]
    case.check(export.returncode == 0 and not missing,
               f"all {len(acked)} acknowledged apns-ids are in the journal after three kills ({len(missing)} missing)")
    subprocess.run(["rm", "-rf", work])
    return case


# name: (function, extra serve flags, RSS bound in MiB during the attack); flags None: the
# function runs its own servers, given the binary.
CASES = {
    "rapid-reset": (rapid_reset, ["--threads", "1"], 200),
    "window-update-flood": (lambda c: control_flood(c, "window-update"), ["--threads", "1"], 200),
    "ping-flood": (lambda c: control_flood(c, "ping"), ["--threads", "1"], 200),
    "settings-flood": (lambda c: control_flood(c, "settings"), ["--threads", "1"], 200),
    "priority-flood": (lambda c: control_flood(c, "priority"), ["--threads", "1"], 200),
    "empty-data-flood": (lambda c: control_flood(c, "empty-data"), ["--threads", "1"], 200),
    "continuation-flood": (continuation_flood, ["--threads", "1"], 200),
    "hpack-bomb": (hpack_bomb, ["--threads", "1"], 200),
    "oversized-headers": (oversized_headers, ["--threads", "1"], 200),
    "overlong-fields": (overlong_fields, ["--threads", "1", "--max-header-list-size", "1048576"], 200),
    "stream-overrun": (stream_overrun, ["--threads", "1"], 200),
    "half-open-bodies": (half_open_bodies, ["--threads", "2"], 200),
    "zero-window-pages": (zero_window_pages, ["--threads", "2"], 200),
    "http1-abandoned-bodies": (http1_abandoned_bodies, ["--threads", "2"], 200),
    "http1-large-bodies": (http1_large_bodies, ["--threads", "2", "--max-memory", "128MiB"], 200),
    "slowloris": (slowloris, ["--threads", "1", "--head-timeout", "2"], 200),
    "http1-body-timeout": (http1_body_timeout, ["--threads", "1", "--body-timeout", "2"], 200),
    "h2-open-stream-timeout": (h2_open_stream_timeout, ["--threads", "1", "--body-timeout", "2", "--idle-timeout", "2"], 200),
    "zero-window-send-timeout": (zero_window_send_timeout, ["--threads", "1", "--body-timeout", "2"], 200),
    "connection-limit": (connection_limit, ["--threads", "2", "--max-connections", "40"], 200),
    "limit-flood": (limit_flood, ["--threads", "2", "--max-connections", "40"], 200),
    "tls-handshake-stalls": (tls_handshake_stalls, ["--threads", "1"], 200),
    "http1-malformed": (http1_malformed, ["--threads", "1"], 200),
    "too-large-shapes": (too_large_shapes, ["--threads", "1"], 200),
    "fuzzed-bodies": (fuzzed_bodies, ["--threads", "2", "--allow-override-header", "--apns-http1"], 200),
    "service-account-flood": (service_account_flood, ["--threads", "1"], 200),
    "h2-frame-fuzz": (h2_frame_fuzz, ["--threads", "1"], 200),
    "admin-flood": (admin_flood, ["--threads", "1", "--admin-rate", "500"], 200),
    # Its million pushes would otherwise stay in the in-memory journal (1,000,000 records kept)
    # and hide whether the rules' memory comes back.
    "fault-rule-scale": (fault_rule_scale, ["--threads", "1", "--journal-max-records", "20000"], 400),
    "rebinding": (rebinding, ["--threads", "1", "--apns-http1"], 200),
    "admin-rate": (admin_rate, ["--threads", "2", "--admin-rate", "100"], 200),
    "channel-fill": (channel_fill, ["--threads", "2"], 400),
    "connection-memory": (connection_memory, ["--threads", "2", "--max-memory", "32MiB"], 200),
    "state-memory": (state_memory, ["--threads", "1", "--max-state-memory", "16MiB"], 200),
    "journal-full": (journal_full, None, 0),
    "fd-limit": (fd_limit, None, 0),
    "kill-nine-three-times": (kill_nine_three_times, None, 0),
}


def run_case(binary, name):
    fn, flags, bound = CASES[name]
    if flags is None:
        return fn(binary)
    server = Server(binary, flags)
    case = Case(name, server, bound)
    try:
        time.sleep(0.2)
        baseline = server.rss_mib()
        prober = Prober(server)
        start = time.time()
        try:
            fn(case)
        except Exception as e:  # an attack that could not run is a failure, not a pass
            case.check(False, f"the attack raised {type(e).__name__}: {e}")
        time.sleep(0.5)
        prober.stop()
        case.check(server.alive(), f"the process is alive after {time.time() - start:.1f} s")
        case.check(not prober.failures and prober.worst < 1.0,
                   f"/healthz on a new connection answered within {prober.worst * 1000:.0f} ms at worst"
                   + (f"; {prober.failures[:3]}" if prober.failures else ""))
        case.check(prober.peak_rss < bound, f"peak RSS {prober.peak_rss:.0f} MiB (< {bound}; baseline {baseline:.0f})")
        after = settle(server, baseline)
        case.check(after < baseline + 40, f"RSS after the attack {after:.0f} MiB (baseline {baseline:.0f})")
    finally:
        server.stop()
        if not case.ok:
            tail = server.stderr()[-2000:]
            if tail:
                case.lines.append("stderr: " + tail)
    return case


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("cases", nargs="*")
    a = ap.parse_args()
    if a.list:
        print("\n".join(CASES))
        return 0
    names = a.cases or list(CASES)
    failed = 0
    for name in names:
        if name not in CASES:
            print(f"unknown case {name}", file=sys.stderr)
            return 2
        case = run_case(a.binary, name)
        print("\n".join(case.lines), flush=True)
        failed += 0 if case.ok else 1
    print(f"{len(names) - failed} of {len(names)} cases passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
