"""A plain Python UDP server as S2's: recvfrom(4096) in a loop, optionally sleeping per
datagram (a server that blocks per message), answering each datagram unchanged.

usage: python3 udp_server.py PORT [SLEEP_US] [--no-reply] [--host=ADDR] [--procs=N]
--host: the address to bind (default 127.0.0.1; an IPv6 address binds an AF_INET6 socket).
--procs=N: N processes (the first forks the others), each with its own SO_REUSEPORT
socket on the port, as a pre-forked server; the others end when the first is gone.
Each process prints "ready" once bound; all end by themselves after 120 s (tests stop
them earlier).
"""
import os
import socket
import sys
import time

port = int(sys.argv[1])
sleep_s = float(sys.argv[2]) / 1e6 if len(sys.argv) > 2 and sys.argv[2][0] != "-" else 0.0
reply = "--no-reply" not in sys.argv
host = "127.0.0.1"
procs = 1
for a in sys.argv[2:]:
    if a.startswith("--host="):
        host = a[len("--host="):]
    elif a.startswith("--procs="):
        procs = int(a[len("--procs="):])
family = socket.AF_INET6 if ":" in host else socket.AF_INET
first = os.getpid()
for _ in range(procs - 1):
    if os.fork() == 0:
        break
s = socket.socket(family, socket.SOCK_DGRAM)
if procs > 1:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
s.bind((host, port))
s.settimeout(0.5)
print("ready", flush=True)
end = time.monotonic() + 120
while time.monotonic() < end:
    if os.getpid() != first and os.getppid() != first:
        break
    try:
        data, addr = s.recvfrom(4096)
    except socket.timeout:
        continue
    if sleep_s:
        time.sleep(sleep_s)
    if reply:
        s.sendto(data, addr)
