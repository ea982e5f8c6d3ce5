#!/usr/bin/env python3
"""A hostile h2c server (prior knowledge) for tests/suite/h2_hostile.rs, its HTTP/2 frames made
by hand with struct. Usage: h2_hostile.py MODE [COUNT_FILE]; it listens on a free port of
127.0.0.1 and prints that port on its first line of stdout. Each connection gets SETTINGS
(SETTINGS_MAX_CONCURRENT_STREAMS 100) and then, by MODE:

  good          answers each request (HEADERS) with HEADERS :status 200 and DATA "ok"
                ending the stream: the well-behaved server the floods are compared with.
  ping          floods PING frames and reads slowly; answers nothing.
  settings      floods SETTINGS frames and reads slowly; answers nothing.
  rst           resets each request (RST_STREAM REFUSED_STREAM) and after the first
                floods RST_STREAM on its stream, closed already.
  window        floods WINDOW_UPDATE frames of 1 byte on the connection; answers nothing.
  continuation  answers the first request with HEADERS without END_HEADERS, then empty
                CONTINUATION frames without end.
  bigheader     answers the first request with a header block of 16 KiB frames (HEADERS
                then CONTINUATIONs) that never ends: over the client's 64 KiB.
  goaway0       GOAWAY last-stream-id 0 (NO_ERROR) once the first request came, then
                closes once the client does; answers nothing. With COUNT_FILE it writes
                there the requests (HEADERS) it received in all, at each.
  badsettings   SETTINGS_MAX_FRAME_SIZE 100 (a connection error in the SETTINGS exchange).
  goaways       answers each connection's first request, then sends 500 GOAWAY frames
                (last stream that request's, INTERNAL_ERROR) at once.
  closeddata    answers each connection's first request, then floods empty DATA frames
                with END_STREAM on its stream, closed already.
"""

import socket
import struct
import sys
import threading
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = (
    0, 1, 3, 4, 6, 7, 8, 9)
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4


def frame(kind, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + struct.pack(">BBI", kind, flags, sid) + payload


MODE = sys.argv[1]
COUNT_FILE = sys.argv[2] if len(sys.argv) > 2 else None
count_lock = threading.Lock()
requests = [0]

FLOOD = {
    "ping": frame(PING, 0, 0, b"12345678") * 2000,
    "settings": frame(SETTINGS, 0, 0, struct.pack(">HI", 3, 100)) * 2000,
    "window": frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1)) * 2000,
}


class Conn:
    def __init__(self, s):
        self.s = s
        self.lock = threading.Lock()
        self.alive = True

    def send(self, b):
        with self.lock:
            try:
                self.s.sendall(b)
                return True
            except OSError:
                self.alive = False
                return False

    def flood(self, batch):
        while self.alive and self.send(batch):
            pass


def serve(s):
    c = Conn(s)
    first = struct.pack(">HI", 3, 100)
    if MODE == "badsettings":
        first += struct.pack(">HI", 5, 100)
    c.send(frame(SETTINGS, 0, 0, first))
    if MODE in FLOOD:
        threading.Thread(target=c.flood, args=(FLOOD[MODE],), daemon=True).start()
    slow = MODE in ("ping", "settings")
    buf = b""
    preface = False
    try:
        while True:
            got = s.recv(4096 if slow else 65536)
            if not got:
                break
            if slow:
                time.sleep(0.01)
            buf += got
            if not preface:
                if len(buf) < 24:
                    continue
                buf = buf[24:]
                preface = True
            while len(buf) >= 9:
                n = int.from_bytes(buf[:3], "big")
                if len(buf) < 9 + n:
                    break
                kind, flags = buf[3], buf[4]
                sid = int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
                buf = buf[9 + n:]
                if kind == SETTINGS and not flags & ACK:
                    c.send(frame(SETTINGS, ACK, 0))
                elif kind == HEADERS:
                    on_request(c, sid)
    except OSError:
        pass
    c.alive = False
    s.close()


def on_request(c, sid):
    with count_lock:
        requests[0] += 1
        if COUNT_FILE:
            with open(COUNT_FILE, "w") as f:
                f.write(str(requests[0]))
    if MODE == "good":
        c.send(frame(HEADERS, END_HEADERS, sid, b"\x88") + frame(DATA, END_STREAM, sid, b"ok"))
    elif MODE == "rst":
        c.send(frame(RST_STREAM, 0, sid, struct.pack(">I", 0x7)))
        if not getattr(c, "started", False):
            c.started = True
            batch = frame(RST_STREAM, 0, sid, struct.pack(">I", 0x8)) * 2000
            threading.Thread(target=c.flood, args=(batch,), daemon=True).start()
    elif MODE == "continuation" and not getattr(c, "started", False):
        c.started = True
        c.send(frame(HEADERS, 0, sid, b""))
        threading.Thread(target=c.flood, args=(frame(CONTINUATION, 0, sid) * 2000,),
                         daemon=True).start()
    elif MODE == "bigheader" and not getattr(c, "started", False):
        c.started = True
        piece = b"\x00" * 16384
        c.send(frame(HEADERS, 0, sid, piece))
        threading.Thread(target=c.flood, args=(frame(CONTINUATION, 0, sid, piece) * 8,),
                         daemon=True).start()
    elif MODE in ("goaways", "closeddata") and not getattr(c, "started", False):
        c.started = True
        c.send(frame(HEADERS, END_HEADERS, sid, b"\x88") + frame(DATA, END_STREAM, sid, b"ok"))
        if MODE == "goaways":
            c.send(frame(GOAWAY, 0, 0, struct.pack(">II", sid, 0x2)) * 500)
        else:
            threading.Thread(target=c.flood, args=(frame(DATA, END_STREAM, sid) * 2000,),
                             daemon=True).start()
    elif MODE == "goaway0" and not getattr(c, "gone", False):
        c.gone = True
        c.send(frame(GOAWAY, 0, 0, struct.pack(">II", 0, 0)))


def main():
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(128)
    print(ls.getsockname()[1], flush=True)
    while True:
        s, _ = ls.accept()
        threading.Thread(target=serve, args=(s,), daemon=True).start()


main()
