#!/usr/bin/env python3
"""tpslab benchmark, HTTP/2: `load http --http2` beside Debian's h2load (nghttp2-client),
both against the same nginx (h2c with prior knowledge, one worker on CPU 1, a 12-byte
static file), clients on CPU 0, alternating h2load / tpslab round by round.

Run from the repository:  python3 bench/http2.py [--rounds 5] [--seconds 5]

h2load is a closed loop (`-c 1 -m STREAMS`: as many requests as the streams take, as fast
as the server answers). Each round runs it and tpslab's closed loop, `ramp http --http2
--connections 1 --users STREAMS..STREAMS` (one step, no warm-up, each user one stream in
flight as h2load's `-m STREAMS`), in turns (h2load first in odd rounds, tpslab first in
even ones); tpslab's TPS is compared with h2load's requests/s as a ratio, its mean
response time with h2load's mean time per request. Beside each run: nginx's CPU time per
request answered (/proc/PID/stat) and CPU 1's steal time (/proc/stat), since at 100
streams nginx's CPU is the limit for both clients and its cost per request moves from run
to run. Then `load http` (an open loop at a fixed rate; it has no max-rate mode) runs at
the rate h2load reached in that round (`--connections 1 --streams STREAMS --load-threads
1`): whether it holds that rate (achieved / intended, late sends) and its latency there
(corrected from the intended send times, and uncorrected).
Streams: 1 and 100. Prints medians (min-max) over the rounds.
"""

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import cpu_ticks, free_port, on, sh  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TPSLAB = os.environ.get("TPSLAB_BIN") or os.path.join(ROOT, "target", "release", "tpslab")
OUT = tempfile.mkdtemp(prefix="tpslab-bench-h2-")
# The benchmark's runs stay out of the user's run history.
os.environ["XDG_DATA_HOME"] = os.path.join(OUT, "history")


def nginx(port):
    """nginx, one worker pinned to CPU 1, h2c on `port`; returns its Popen (stopped by PID)."""
    d = os.path.join(OUT, "nginx")
    os.makedirs(os.path.join(d, "html"), exist_ok=True)
    os.makedirs(os.path.join(d, "logs"), exist_ok=True)
    with open(os.path.join(d, "html", "index.html"), "w") as f:
        f.write("hello world\n")
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""daemon off; master_process off; worker_processes 1; pid {d}/nginx.pid;
error_log {d}/logs/error.log; worker_rlimit_nofile 65536;
events {{ worker_connections 4096; }}
http {{ access_log off; keepalive_requests 100000000; http2_max_concurrent_streams 128;
  client_body_temp_path {d}/b; proxy_temp_path {d}/p; fastcgi_temp_path {d}/f;
  uwsgi_temp_path {d}/u; scgi_temp_path {d}/s;
  server {{ listen 127.0.0.1:{port} http2; root {d}/html; }} }}
""")
    p = subprocess.Popen(on(1, "/usr/sbin/nginx", "-p", d, "-c", conf), stdin=subprocess.DEVNULL)
    deadline = time.time() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return p
        except OSError:
            if time.time() > deadline:
                p.kill()
                sys.exit("nginx did not start")
            time.sleep(0.05)


def h2load(url, streams, secs):
    """h2load's requests/s and mean time per request (ms) over `secs` s, one connection."""
    out = sh(on(0, "h2load", "-c", "1", "-t", "1", "-m", str(streams), "-D", str(secs), url),
             timeout=secs + 60).stdout
    rps = float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out).group(1))
    m = re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)", out)

    def ms(v):
        for unit, f in (("us", 1e-3), ("ms", 1.0), ("s", 1e3)):
            if v.endswith(unit):
                return float(v[: -len(unit)]) * f
        return float(v)

    ok = int(re.search(r"status codes: (\d+) 2xx", out).group(1))
    done = int(re.search(r"requests: \d+ total, \d+ started, (\d+) done", out).group(1))
    return {"rps": rps, "mean_ms": ms(m.group(3)), "ok": ok, "done": done}


def tpslab(url, streams, rate, secs):
    """tpslab load http --http2 at `rate`: achieved rate, the share sent late, latency."""
    js = os.path.join(OUT, "t.json")
    sh(on(0, TPSLAB, "load", "http", url, "--http2", "--connections", "1", "--streams",
          str(streams), "--load-threads", "1", "--rate", str(int(rate)), "--duration",
          f"{secs}s", "--json", js), timeout=secs + 60)
    with open(js) as f:
        r = json.load(f)
    res = r["result"]
    sent = res["sent"]
    ok = res["status"]["s2xx"]
    return {
        "rps": sent / secs,
        "ok_rps": ok / secs,
        "intended": res["intended"],
        "late_pct": 100.0 * res["late"] / max(sent, 1),
        "p50_ms": res["corrected"]["p50_ns"] / 1e6,
        "p99_ms": res["corrected"]["p99_ns"] / 1e6,
        "u_p50_ms": res["uncorrected"]["p50_ns"] / 1e6,
        "u_mean_ms": res["uncorrected"].get("mean_ns", 0) / 1e6,
        "errors": sum(v for v in res["errors"].values()),
    }


def ramp_h2(url, streams, secs):
    """tpslab ramp http --http2, one step of `streams` users on one connection: TPS and
    mean response time (ms; from p50 and the histogram's mean where the record has it)."""
    js = os.path.join(OUT, "r.json")
    sh(on(0, TPSLAB, "ramp", "http", url, "--http2", "--connections", "1", "--users",
          f"{streams}..{streams}", "--load-threads", "1", "--step-duration", f"{secs}s",
          "--warmup", "0s", "--no-history", "--json", js), timeout=secs + 60)
    with open(js) as f:
        r = json.load(f)
    s = r["steps"][0]
    resp = s["response"]
    return {
        "tps": s["tps"],
        # Requests answered in the run (no warm-up), for nginx's cost per request.
        "done": s["completed"],
        "mean_ms": resp.get("mean_ns", 0) / 1e6,
        "p50_ms": resp["p50_ns"] / 1e6,
        "errors": sum(s["errors"].values()),
    }


def steal_ticks(cpu):
    """CPU `cpu`'s steal time, clock ticks (/proc/stat's 8th column): time the hypervisor
    ran something else while this guest's CPU wanted to run."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith(f"cpu{cpu} "):
                return int(line.split()[8])
    return 0


def server_cost(ng, fn):
    """Runs `fn()` and adds to its result nginx's CPU time per request answered (us; from
    /proc/PID/stat, 10 ms ticks) and CPU 1's steal over the run (% of the run's time)."""
    hz = os.sysconf("SC_CLK_TCK")
    c0, s0, t0 = cpu_ticks(ng.pid), steal_ticks(1), time.time()
    r = fn()
    c1, s1, t1 = cpu_ticks(ng.pid), steal_ticks(1), time.time()
    r["nginx_us"] = (c1 - c0) / hz * 1e6 / max(r["done"], 1)
    r["steal_pct"] = 100.0 * (s1 - s0) / hz / (t1 - t0)
    return r


def med(xs):
    return f"{statistics.median(xs):,.3f} ({min(xs):,.3f}-{max(xs):,.3f})" if xs else "-"


def medi(xs):
    return f"{statistics.median(xs):,.0f} ({min(xs):,.0f}-{max(xs):,.0f})" if xs else "-"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=5)
    a = ap.parse_args()
    if shutil.which("h2load") is None:
        sys.exit("bench/http2.py: needs h2load (apt-get install nghttp2-client)")
    if not os.path.exists(TPSLAB):
        sh(["cargo", "build", "--release", "-q"], cwd=ROOT)
    port = free_port()
    ng = nginx(port)
    url = f"http://127.0.0.1:{port}/index.html"
    rows = {}
    try:
        for rnd in range(a.rounds):
            for streams in (1, 100):
                # The two closed loops in turns (h2load first in odd rounds, tpslab's in
                # even ones), so neither always runs on a warmer or cooler server.
                if rnd % 2 == 0:
                    h = server_cost(ng, lambda: h2load(url, streams, a.seconds))
                    c = server_cost(ng, lambda: ramp_h2(url, streams, a.seconds))
                else:
                    c = server_cost(ng, lambda: ramp_h2(url, streams, a.seconds))
                    h = server_cost(ng, lambda: h2load(url, streams, a.seconds))
                t = tpslab(url, streams, h["rps"], a.seconds)
                rows.setdefault(streams, []).append((h, t, c))
                print(f"round {rnd + 1} streams {streams}: h2load {h['rps']:,.0f}/s "
                      f"(mean {h['mean_ms']:.3f} ms); tpslab at that rate: sent {t['rps']:,.0f}/s, "
                      f"2xx {t['ok_rps']:,.0f}/s, late {t['late_pct']:.1f} %, p50 {t['p50_ms']:.3f} ms "
                      f"p99 {t['p99_ms']:.3f} ms (uncorrected p50 {t['u_p50_ms']:.3f} ms), "
                      f"errors {t['errors']}; closed loop: tpslab ramp {c['tps']:,.0f} TPS "
                      f"(mean {c['mean_ms']:.3f} ms, p50 {c['p50_ms']:.3f} ms, errors {c['errors']}); "
                      f"nginx CPU per request {h['nginx_us']:.1f} us under h2load, {c['nginx_us']:.1f} us "
                      f"under tpslab; CPU 1 steal {h['steal_pct']:.1f} % / {c['steal_pct']:.1f} %",
                      flush=True)
    finally:
        ng.terminate()
        ng.wait(10)
    print()
    print(f"HTTP/2 h2c against nginx 1 worker (CPU 1), client on CPU 0, 1 connection; "
          f"{a.rounds} rounds of {a.seconds} s; median (min-max)")
    for streams, rs in rows.items():
        hs, ts, cs = [r[0] for r in rs], [r[1] for r in rs], [r[2] for r in rs]
        print(f" streams {streams:>3}: h2load {medi([h['rps'] for h in hs])} req/s, "
              f"mean {med([h['mean_ms'] for h in hs])} ms")
        print(f"              tpslab at h2load's rate: achieved/intended "
              f"{med([t['rps'] / h['rps'] for h, t, _ in rs])}, answered 2xx {medi([t['ok_rps'] for t in ts])}/s, "
              f"late {med([t['late_pct'] for t in ts])} %, corrected p50 {med([t['p50_ms'] for t in ts])} ms, "
              f"p99 {med([t['p99_ms'] for t in ts])} ms, uncorrected p50 {med([t['u_p50_ms'] for t in ts])} ms")
        print(f"              tpslab ramp http --http2 (closed loop): {medi([c['tps'] for c in cs])} TPS, "
              f"TPS / h2load's req/s {med([c['tps'] / h['rps'] for h, t, c in rs])}, mean response "
              f"{med([c['mean_ms'] for c in cs])} ms (/ h2load's mean {med([c['mean_ms'] / h['mean_ms'] for h, t, c in rs])})")
        print(f"              median TPS / median h2load req/s "
              f"{statistics.median([c['tps'] for c in cs]) / statistics.median([h['rps'] for h in hs]):.3f}; "
              f"nginx CPU per request answered: under h2load {med([h['nginx_us'] for h in hs])} us, "
              f"under tpslab ramp {med([c['nginx_us'] for c in cs])} us; CPU 1 steal "
              f"{med([h['steal_pct'] for h in hs])} % / {med([c['steal_pct'] for c in cs])} %")
    shutil.rmtree(OUT, ignore_errors=True)


if __name__ == "__main__":
    main()
