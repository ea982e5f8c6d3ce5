#!/usr/bin/env python3
"""TCP servers of tpslab's length-framed protocol (a 4-byte big-endian length, then that
many bytes; each request answered by a 6-byte frame "\\0\\0\\0\\2ok"), for the capacity
tests. Ends by itself after 120 s.

  tcp_server.py prefork PORT WORKERS WORK_US   a master that listens and waits while
      WORKERS forked processes accept and serve (each an event loop; WORK_US of busy
      CPU work per request): nginx's shape.
  tcp_server.py slowaccept PORT BACKLOG ACCEPT_MS   listen(BACKLOG), one accept every
      ACCEPT_MS; accepted connections served at once by another thread.
  tcp_server.py reset PORT   every connection reset (SO_LINGER 0, close) at its first
      request.
"""
import os
import selectors
import signal
import socket
import struct
import sys
import threading
import time

REPLY = b"\0\0\0\2ok"


def listener(port, backlog):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(backlog)
    return s


def busy(us):
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        pass


def frames(buf):
    """Whole requests at the head of buf: (count, rest)."""
    n = 0
    while len(buf) >= 4:
        (ln,) = struct.unpack(">I", buf[:4])
        if len(buf) < 4 + ln:
            break
        buf = buf[4 + ln:]
        n += 1
    return n, buf


def serve(sel, work_us, lsock=None):
    """An event loop: accepts on lsock (when given) and answers each request."""
    bufs = {}
    if lsock is not None:
        lsock.setblocking(False)
        sel.register(lsock, selectors.EVENT_READ)
    while True:
        for key, _ in sel.select(timeout=0.5):
            s = key.fileobj
            if s is lsock:
                try:
                    c, _ = lsock.accept()
                except (BlockingIOError, InterruptedError):
                    continue
                c.setblocking(False)
                bufs[c] = b""
                sel.register(c, selectors.EVENT_READ)
                continue
            try:
                data = s.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            if not data:
                sel.unregister(s)
                bufs.pop(s, None)
                s.close()
                continue
            n, bufs[s] = frames(bufs[s] + data)
            for _ in range(n):
                busy(work_us)
            if n:
                s.setblocking(True)
                try:
                    s.sendall(REPLY * n)
                except OSError:
                    pass
                s.setblocking(False)


def prefork(port, workers, work_us):
    ls = listener(port, 1024)
    kids = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:
            serve(selectors.DefaultSelector(), work_us, ls)
            os._exit(0)
        kids.append(pid)

    def stop(*_):
        for k in kids:
            try:
                os.kill(k, signal.SIGKILL)
            except OSError:
                pass
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGALRM, stop)
    signal.alarm(120)
    while True:
        signal.pause()


def slowaccept(port, backlog, accept_ms):
    ls = listener(port, backlog)
    sel = selectors.DefaultSelector()
    lock = threading.Lock()
    pending = []

    def loop():
        bufs = {}
        while True:
            with lock:
                while pending:
                    c = pending.pop()
                    c.setblocking(False)
                    bufs[c] = b""
                    sel.register(c, selectors.EVENT_READ)
            for key, _ in sel.select(timeout=0.01):
                s = key.fileobj
                try:
                    data = s.recv(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(s)
                    bufs.pop(s, None)
                    s.close()
                    continue
                n, bufs[s] = frames(bufs[s] + data)
                if n:
                    s.setblocking(True)
                    try:
                        s.sendall(REPLY * n)
                    except OSError:
                        pass
                    s.setblocking(False)

    threading.Thread(target=loop, daemon=True).start()
    end = time.time() + 120
    while time.time() < end:
        c, _ = ls.accept()
        with lock:
            pending.append(c)
        time.sleep(accept_ms / 1000.0)


def reset(port):
    ls = listener(port, 1024)
    end = time.time() + 120
    sel = selectors.DefaultSelector()
    ls.setblocking(False)
    sel.register(ls, selectors.EVENT_READ)
    while time.time() < end:
        for key, _ in sel.select(timeout=0.5):
            s = key.fileobj
            if s is ls:
                try:
                    c, _ = ls.accept()
                except (BlockingIOError, InterruptedError):
                    continue
                c.setblocking(False)
                sel.register(c, selectors.EVENT_READ)
                continue
            sel.unregister(s)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()


def main():
    mode = sys.argv[1]
    port = int(sys.argv[2])
    if mode == "prefork":
        prefork(port, int(sys.argv[3]), int(sys.argv[4]))
    elif mode == "slowaccept":
        slowaccept(port, int(sys.argv[3]), int(sys.argv[4]))
    elif mode == "reset":
        reset(port)
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
