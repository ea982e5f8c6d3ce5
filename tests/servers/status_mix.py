"""An HTTP/1.1 keep-alive server whose replies mix status codes and times, for the live
view of `load http` (tests/suite/live.rs; the stream of
crates/tpslab-report/testdata/live/load_http_codes.ndjson). Request n (counted from 1,
all connections together): 503 when n is a multiple of 25, else 404 when n ends in 5,
else 200; each sleeps 1 ms, every 40th 30 ms (a slow tail in the histogram). Ends by
itself after 120 s.

Usage: python3 status_mix.py PORT
"""
import http.server
import os
import socketserver
import sys
import threading
import time

COUNT = [0]
LOCK = threading.Lock()
REASON = {200: b"OK", 404: b"Not Found", 503: b"Service Unavailable"}


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        with LOCK:
            COUNT[0] += 1
            n = COUNT[0]
        code = 503 if n % 25 == 0 else 404 if n % 10 == 5 else 200
        time.sleep(0.030 if n % 40 == 0 else 0.001)
        self.wfile.write(
            b"HTTP/1.1 %d %s\r\nContent-Length: 3\r\n\r\nok\n" % (code, REASON[code])
        )

    def log_message(self, *a):
        pass


class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


threading.Timer(120, lambda: os._exit(0)).start()
S(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
