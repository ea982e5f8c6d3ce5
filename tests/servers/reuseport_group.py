"""A foreign SO_REUSEPORT group: one Python process with one socket per SO_RCVBUF given,
all bound to one port with SO_REUSEPORT, each read by a thread of its own (recvfrom(4096)
in a loop, answering each datagram unchanged).

usage: python3 reuseport_group.py PORT RCVBUF[,RCVBUF...]
Prints "socket INODE RCVBUF" for each socket (RCVBUF: getsockopt(SO_RCVBUF), the limit the
kernel granted), then "ready"; ends by itself after 120 s (tests stop it earlier).
"""
import os
import socket
import sys
import threading
import time

port = int(sys.argv[1])
socks = []
for want in sys.argv[2].split(","):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, int(want))
    s.bind(("127.0.0.1", port))
    s.settimeout(0.5)
    socks.append(s)
end = time.monotonic() + 120


def serve(s):
    while time.monotonic() < end:
        try:
            data, addr = s.recvfrom(4096)
        except socket.timeout:
            continue
        s.sendto(data, addr)


for s in socks:
    got = s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    print(f"socket {os.fstat(s.fileno()).st_ino} {got}", flush=True)
    threading.Thread(target=serve, args=(s,), daemon=True).start()
print("ready", flush=True)
time.sleep(max(0.0, end - time.monotonic()))
