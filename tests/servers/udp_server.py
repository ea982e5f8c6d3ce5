"""A plain Python UDP server as S2's: recvfrom(4096) in a loop, optionally sleeping per
datagram (a server that blocks per message), answering each datagram unchanged.

usage: python3 udp_server.py PORT [SLEEP_US] [--no-reply]
It prints "ready" once bound and ends by itself after 120 s (tests stop it earlier).
"""
import socket
import sys
import time

port = int(sys.argv[1])
sleep_s = float(sys.argv[2]) / 1e6 if len(sys.argv) > 2 else 0.0
reply = "--no-reply" not in sys.argv
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", port))
s.settimeout(0.5)
print("ready", flush=True)
end = time.monotonic() + 120
while time.monotonic() < end:
    try:
        data, addr = s.recvfrom(4096)
    except socket.timeout:
        continue
    if sleep_s:
        time.sleep(sleep_s)
    if reply:
        s.sendto(data, addr)
