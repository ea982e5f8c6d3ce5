"""Experiment (issue 61): does sending every datagram of a batch from one buffer (as the
kernel-limit sender does) instead of 64 distinct ones close tpslab's gap to it at 1024 B?

Needs a binary built with bench/experiments/shared-slot.patch applied (TPSLAB_BIN;
TPSLAB_SHARED_SLOT set makes every message of a batch point at slot 0's bytes: the
datagrams' headers are then wrong, which the kernel-limit receiver does not read).
Runs, in rotated rounds, `load udp --rate max --no-replies` with distinct slots, with the
shared slot, and `udpsend -m sendmmsg -b 64`, each into `udprecv -m recvmmsg -b 64` on
CPU 1 in a private namespace (bench/run.py's one-way steps), and prints received pps
medians and the per-round ratios' mean [95 %].
Run from the repository (root):  python3 bench/experiments/shared_slot.py [ROUNDS] [SIZES]
"""
import os, sys, statistics
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import run  # noqa: E402
from common import ratio_ci, med  # noqa: E402

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
sizes = [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "64,1024").split(",")]
for prog, extra in (("udpsend", ["-pthread"]), ("udprecv", [])):
    run.sh(["gcc", "-O2", *extra, "-o", os.path.join(run.OUT, prog), os.path.join(run.LIMITS, prog + ".c")])
run.sh(["ip", "netns", "add", run.NS])
run.sh(["ip", "-n", run.NS, "link", "set", "lo", "up"])


def tp(shared):
    def f(size, port):
        if shared:
            os.environ["TPSLAB_SHARED_SLOT"] = "1"
        else:
            os.environ.pop("TPSLAB_SHARED_SLOT", None)
        return run.tpslab_oneway(size, 3, port)["recv_pps"]
    return f


tools = [("distinct", tp(False)), ("shared", tp(True)), ("kernel-limit", lambda s, p: run.udpsend_oneway(s, 3, p)["recv_pps"])]
rows = {s: [] for s in sizes}
try:
    port = 20000
    for r in range(rounds):
        for size in sizes:
            k = r % len(tools)
            got = {}
            for name, fn in tools[k:] + tools[:k]:
                port += 1
                got[name] = fn(size, port)
            rows[size].append(got)
            print(f"round {r + 1} {size} B: " + "  ".join(f"{n} {v:,.0f}" for n, v in got.items()), flush=True)
finally:
    run.teardown()
for size, rs in rows.items():
    for n in ("distinct", "shared", "kernel-limit"):
        print(f"{size:>5} B {n:>12}: {med([x[n] for x in rs])}")
    for a, b in (("shared", "distinct"), ("distinct", "kernel-limit"), ("shared", "kernel-limit")):
        print(f"{size:>5} B {a}/{b}: {ratio_ci([(x[a], x[b]) for x in rs])}; median "
              f"{statistics.median(x[a] / x[b] for x in rs):.3f}")
