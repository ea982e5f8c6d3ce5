#!/usr/bin/env python3
"""Does the observer's sampling cost the generator? One binary's one-way run (as
bench/run.py measures it: `load udp --rate max --no-replies`, every tpslab thread on CPU 0,
into the kernel-limit receiver on CPU 1) with the observer at `--interval 10ms` and at 1s,
beside the kernel-limit sender, in alternating rounds with the order rotated. Prints each
round's received pps and each interval's per-round ratio to the kernel-limit sender.

Run as root from the repository:
    python3 bench/interval_study.py [--bin target/release/tpslab] [--size 1024] [--rounds 7]
"""

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import before_after  # noqa: E402  (the namespace and the kernel-limit programs)
import run  # noqa: E402


def tpslab(binary, size, secs, port, interval):
    r = run.udprecv(port, secs)
    js = os.path.join(run.OUT, "interval.json")
    run.sh(run.ns(*run.on(0, binary, "load", "udp", f"127.0.0.1:{port}", "--rate", "max", "--no-replies",
                          "--size", str(size), "--duration", f"{secs}s", "--warmup", "0s", "--json", js,
                          "--interval", interval)))
    return run.recv_pps(r.stop())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(run.ROOT, "target", "release", "tpslab"))
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seconds", type=int, default=3)
    a = ap.parse_args()
    before_after.setup_oneway()
    got = {"10ms": [], "1s": [], "kernel-limit": []}
    port = 47000
    try:
        for rnd in range(a.rounds):
            order = list(got)
            order = order[rnd % 3:] + order[:rnd % 3]
            for k in order:
                port += 1
                if k == "kernel-limit":
                    got[k].append(run.udpsend_oneway(a.size, a.seconds, port)["recv_pps"])
                else:
                    got[k].append(tpslab(a.bin, a.size, a.seconds, port, k))
            print(f"round {rnd + 1} {a.size} B: " + ", ".join(f"{k} {got[k][-1]:,.0f}" for k in order), flush=True)
    finally:
        run.sh(["ip", "netns", "del", run.NS])
    for k in ("10ms", "1s"):
        r = [x / y for x, y in zip(got[k], got["kernel-limit"])]
        print(f"--interval {k}: median {statistics.median(got[k]):,.0f} pps; /kernel-limit per round "
              + " ".join(f"{x:.2f}" for x in r) + f" (median {statistics.median(r):.2f})")
    print(f"kernel-limit: median {statistics.median(got['kernel-limit']):,.0f} pps")


if __name__ == "__main__":
    main()
