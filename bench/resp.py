#!/usr/bin/env python3
"""tpslab's closed loop over RESP (`ramp tcp --protocol 'redis:GET key:__rand_int__'`)
against its peer, `redis-benchmark -t get` (the same command: without -r its key is the
literal `key:__rand_int__`), on one redis-server, in alternating rounds.

    python3 bench/resp.py [--clients 50] [--rounds 5] [--seconds 3]

Each round runs both back to back (the order alternating round by round): tpslab as one
ramp step of CLIENTS users on one load thread (`--load-threads 1`, after a 1 s warm-up,
SECONDS measured), redis-benchmark with CLIENTS clients on its one thread, as many
requests as it sends in about SECONDS at the rate tpslab just measured (`-n`). Prints
each round's requests/s and the medians. Needs redis-server and redis-benchmark
(Debian's redis-server and redis-tools); TPSLAB_BIN=PATH (default target/release/tpslab).
"""
import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import tempfile
import time

import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import free_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TPSLAB = os.environ.get("TPSLAB_BIN", os.path.join(ROOT, "target/release/tpslab"))
KEY = "key:__rand_int__"


def tpslab_tps(port, clients, secs, tmp):
    out = os.path.join(tmp, "ramp.json")
    subprocess.run(
        [TPSLAB, "ramp", "tcp", f"127.0.0.1:{port}", "--protocol", f"redis:GET {KEY}",
         "--users", f"{clients}..{clients}", "--step-duration", f"{secs}s", "--warmup", "1s",
         "--load-threads", "1", "--json", out],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    step = json.load(open(out))["steps"][0]
    assert not step["errors"], step["errors"]
    return step["tps"]


def benchmark_tps(port, clients, requests):
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-t", "get", "-c", str(clients), "-n",
         str(requests), "-q"], check=True, capture_output=True, text=True).stdout
    # "GET: 81234.57 requests per second, p50=0.303 msec" (after \r progress lines).
    m = re.search(r"GET: ([0-9.]+) requests per second", out.split("\r")[-1])
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=3)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="tpslab-bench-resp-")
    port = free_port()
    srv = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", tmp], stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                break
            except OSError:
                time.sleep(0.05)
        t, r = [], []
        requests = 100_000
        for k in range(a.rounds):
            order = ["tpslab", "peer"] if k % 2 == 0 else ["peer", "tpslab"]
            for tool in order:
                if tool == "tpslab":
                    t.append(tpslab_tps(port, a.clients, a.seconds, tmp))
                    requests = int(t[-1] * a.seconds)
                else:
                    r.append(benchmark_tps(port, a.clients, requests))
            print(f"round {k + 1}: tpslab {t[-1]:.0f} requests/s, redis-benchmark {r[-1]:.0f} requests/s")
        mt, mr = statistics.median(t), statistics.median(r)
        print(f"GET on one redis-server, {a.clients} clients, {a.rounds} rounds: "
              f"tpslab ramp tcp --protocol redis (1 load thread) median {mt:.0f} "
              f"({min(t):.0f}-{max(t):.0f}) requests/s; redis-benchmark -t get median {mr:.0f} "
              f"({min(r):.0f}-{max(r):.0f}); ratio of medians {mt / mr:.2f}")
    finally:
        srv.kill()
        srv.wait()


if __name__ == "__main__":
    main()
