#!/usr/bin/env python3
"""How late the kernel sends a TCP keepalive probe set TCP_KEEPIDLE seconds ahead, on
loopback (no root needed; about 45 s). The probe's time is read from TCP_INFO
tcpi_last_ack_recv when its answer arrives. Why `tpslab probe idle` triggers its probes
from user space: the timer wheel rounds a timer up to its level's granularity (at
CONFIG_HZ=250: 256 ms up to 16 s ahead, 2 s up to 131 s, 16 s up to 17 min)."""
import socket, struct, time, threading
def measure(idle):
    l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
    c = socket.socket(); c.connect(l.getsockname()); s, _ = l.accept()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, idle)
    t0 = time.monotonic()
    prev = None
    while time.monotonic() - t0 < idle + 5:
        info = c.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
        last_ack_recv = struct.unpack_from("I", info, 56)[0]
        if prev is not None and last_ack_recv < prev:
            probe_at = time.monotonic() - t0 - last_ack_recv / 1000
            print(f"keepalive idle {idle} s: first probe answered {probe_at:.3f} s after setting it (late by {probe_at-idle:.3f} s)")
            return
        prev = last_ack_recv
        time.sleep(0.005)
    print(f"idle {idle}: no probe seen")
ts = [threading.Thread(target=measure, args=(i,)) for i in (15, 20, 40)]
[t.start() for t in ts]; [t.join() for t in ts]
