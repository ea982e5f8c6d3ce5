#!/usr/bin/env python3
"""tpslab benchmark, HTTP/1.1 keep-alive, closed loop: `ramp http` (one step at a fixed
number of users, one keep-alive connection each) beside Debian's `wrk`, both against the
same nginx (one worker on CPU 1, a 12-byte static file), clients on CPU 0 with one thread
each (`wrk -t 1`, `--load-threads 1`), at 1, 50 and 1000 connections; the two tools
alternate round by round (who goes first changes each round).

Run from the repository:  python3 bench/http1.py [--rounds 5] [--seconds 5]
                          python3 bench/http1.py --users-rss [--users 10000]

Both are closed loops: each connection sends its next request when the reply to the last
one is in, as fast as nginx answers. wrk's clock includes its connects; tpslab's step is
measured after a 1 s warm-up. Prints requests/s and p50 per tool as median (min-max) over
the rounds, and the ratios tpslab / wrk as the mean of the per-round ratios (both measured
back to back in the same round) with a 95 % t interval: an interval that contains 1.00
means this run cannot tell the two apart.

`--users-rss` runs one step of `--users` (10,000) keep-alive users against the same nginx
(its worker_connections above that) and prints the generator's peak RSS (VmHWM, from the
record's generator_peak_rss_kib) against the 256 MiB target, with TPS, p50 and errors.
The script raises its own RLIMIT_NOFILE to the hard limit; tpslab does so too.
"""

import argparse
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import duration_ms, free_port, on, raise_nofile, ratio_ci, sh  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TPSLAB = os.environ.get("TPSLAB_BIN") or os.path.join(ROOT, "target", "release", "tpslab")
OUT = tempfile.mkdtemp(prefix="tpslab-bench-h1-")
# The benchmark's runs stay out of the user's run history.
os.environ["XDG_DATA_HOME"] = os.path.join(OUT, "history")
CONNECTIONS = (1, 50, 1000)


def nginx(port, connections):
    """nginx, one worker pinned to CPU 1, HTTP/1.1 on `port`, room for `connections` keep-alive
    connections that stay open for the whole run; returns its Popen (stopped by PID)."""
    d = os.path.join(OUT, "nginx")
    os.makedirs(os.path.join(d, "html"), exist_ok=True)
    os.makedirs(os.path.join(d, "logs"), exist_ok=True)
    with open(os.path.join(d, "html", "index.html"), "w") as f:
        f.write("hello world\n")
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""daemon off; master_process off; worker_processes 1; pid {d}/nginx.pid;
error_log {d}/logs/error.log; worker_rlimit_nofile {2 * connections + 1024};
events {{ worker_connections {2 * connections + 512}; multi_accept on; }}
http {{ access_log off; keepalive_requests 100000000; keepalive_timeout 300s;
  client_body_temp_path {d}/b; proxy_temp_path {d}/p; fastcgi_temp_path {d}/f;
  uwsgi_temp_path {d}/u; scgi_temp_path {d}/s;
  server {{ listen 127.0.0.1:{port} backlog=4096; root {d}/html; }} }}
""")
    p = subprocess.Popen(on(1, "/usr/sbin/nginx", "-p", d, "-c", conf), stdin=subprocess.DEVNULL)
    deadline = time.time() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return p
        except OSError:
            if p.poll() is not None or time.time() > deadline:
                p.kill()
                sys.exit(f"nginx did not start (see {d}/logs/error.log)")
            time.sleep(0.05)


def wrk(url, conns, secs):
    """wrk, one thread, `conns` connections for `secs` s: requests/s, p50/p99 (ms), errors."""
    out = sh(on(0, "wrk", "-t", "1", "-c", str(conns), "-d", f"{secs}s", "--latency", url),
             timeout=secs + 60).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50 = duration_ms(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1))
    p99 = duration_ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))
    errs = 0
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if m:
        errs += sum(int(x) for x in m.groups())
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if m:
        errs += int(m.group(1))
    return {"rps": rps, "p50_ms": p50, "p99_ms": p99, "errors": errs}


def tpslab(url, users, secs, warmup="1s", threads="1", timeout="2s"):
    """tpslab ramp http, one step of `users` keep-alive users: requests/s, p50/p99 (ms),
    errors (by kind and non-2xx), the generator's peak RSS (MiB)."""
    js = os.path.join(OUT, "t.json")
    cmd = [TPSLAB, "ramp", "http", url, "--users", f"{users}..{users}", "--step", "+1", "--timeout", timeout,
           "--warmup", warmup, "--step-duration", f"{secs}s", "--load-threads", threads,
           "--no-history", "-q", "--json", js]
    sh(on(0, *cmd) if threads == "1" else cmd, timeout=secs + 120)
    with open(js) as f:
        r = json.load(f)
    st = r["steps"][0]
    errs = sum(st["errors"].values())  # errors by kind, non-2xx replies among them
    return {"rps": st["tps"], "p50_ms": st["response"]["p50_ns"] / 1e6,
            "p99_ms": st["response"]["p99_ns"] / 1e6, "errors": errs, "kinds": st["errors"],
            "rss_mib": (r.get("generator_peak_rss_kib") or 0) / 1024}


def med(xs, fmt="{:,.0f}"):
    return f"{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}-{fmt.format(max(xs))})" if xs else "-"


def where():
    """One line: host, CPU, kernel, commit, tool versions, time."""
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = re.search(r"model name\s*:\s*(.*)", f.read()).group(1).strip()
    except (OSError, AttributeError):
        pass
    try:
        commit = sh(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]).stdout.strip()
    except (subprocess.CalledProcessError, OSError):
        commit = "?"
    ng = subprocess.run(["/usr/sbin/nginx", "-v"], capture_output=True, text=True).stderr.strip()
    wv = subprocess.run(["wrk", "-v"], capture_output=True, text=True)
    wv = (wv.stdout + wv.stderr).split("\n")[0].strip()
    return (f"ran: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {platform.node()}, "
            f"{os.cpu_count()} x {cpu}, Linux {platform.release()}, commit {commit}, "
            f"{ng.replace('nginx version: ', '')}, {wv.split(' [')[0]}")


def compare(a):
    port = free_port()
    ng = nginx(port, max(CONNECTIONS))
    url = f"http://127.0.0.1:{port}/index.html"
    rows = {c: [] for c in CONNECTIONS}
    try:
        for rnd in range(a.rounds):
            for c in CONNECTIONS:
                res = {}
                order = ("wrk", "tpslab") if rnd % 2 == 0 else ("tpslab", "wrk")
                for tool in order:
                    res[tool] = wrk(url, c, a.seconds) if tool == "wrk" else tpslab(url, c, a.seconds)
                rows[c].append((res["tpslab"], res["wrk"]))
                t, w = res["tpslab"], res["wrk"]
                print(f"round {rnd + 1} connections {c:>4} ({order[0]} first): tpslab {t['rps']:,.0f}/s "
                      f"p50 {t['p50_ms']:.3f} ms p99 {t['p99_ms']:.3f} ms errors {t['errors']} {t['kinds'] or ''}; "
                      f"wrk {w['rps']:,.0f}/s p50 {w['p50_ms']:.3f} ms p99 {w['p99_ms']:.3f} ms "
                      f"errors {w['errors']}", flush=True)
    finally:
        ng.terminate()
        ng.wait(10)
    print()
    print(f"HTTP/1.1 keep-alive, closed loop, against nginx 1 worker (CPU 1), 12-byte static file; "
          f"clients on CPU 0, 1 thread each: tpslab ramp http (one step, 1 s warm-up) vs wrk -t 1; "
          f"{a.rounds} rounds of {a.seconds} s; median (min-max); ratio = tpslab / wrk, mean of the "
          f"per-round ratios [95 % interval]")
    print(where())
    print(f"{'conns':>5} {'tpslab req/s':>26} {'wrk req/s':>26} {'req/s ratio':>20}  "
          f"{'tpslab p50 ms':>24} {'wrk p50 ms':>24} {'p50 ratio':>20}  p99 ms tpslab / wrk  errors")
    for c, rs in rows.items():
        ts, ws = [r[0] for r in rs], [r[1] for r in rs]
        f3 = "{:,.3f}"
        print(f"{c:>5} {med([t['rps'] for t in ts]):>26} {med([w['rps'] for w in ws]):>26} "
              f"{ratio_ci([(t['rps'], w['rps']) for t, w in rs]):>20}  "
              f"{med([t['p50_ms'] for t in ts], f3):>24} {med([w['p50_ms'] for w in ws], f3):>24} "
              f"{ratio_ci([(t['p50_ms'], w['p50_ms']) for t, w in rs]):>20}  "
              f"{statistics.median([t['p99_ms'] for t in ts]):.3f} / {statistics.median([w['p99_ms'] for w in ws]):.3f}"
              f"{'':>6}{max(t['errors'] for t in ts)} / {max(w['errors'] for w in ws)}")


def users_rss(a):
    # tpslab and nginx each hold one descriptor per connection (and a few more).
    nofile = raise_nofile(a.users + 1024)
    if nofile < a.users + 256:
        sys.exit(f"bench/http1.py: {a.users} users need about {a.users + 256} file descriptors; "
                 f"RLIMIT_NOFILE is {nofile}: raise it (ulimit -Hn, as root) or use fewer --users")
    port = free_port()
    ng = nginx(port, a.users)
    url = f"http://127.0.0.1:{port}/index.html"
    try:
        t0 = time.monotonic()
        t = tpslab(url, a.users, a.seconds, warmup="5s", threads="0", timeout="5s")
        wall = time.monotonic() - t0
    finally:
        ng.terminate()
        ng.wait(10)
    verdict = "under" if t["rss_mib"] < 256 else "OVER"
    print(f"one step of {a.users:,} HTTP/1.1 keep-alive users (tpslab ramp http, --load-threads 0, --timeout 5s, 5 s warm-up, "
          f"{a.seconds} s measured) against nginx 1 worker (CPU 1):")
    print(where())
    print(f"  generator peak RSS {t['rss_mib']:.1f} MiB ({verdict} the 256 MiB target); {t['rps']:,.0f} req/s, "
          f"p50 {t['p50_ms']:.1f} ms, p99 {t['p99_ms']:.1f} ms, errors {t['errors']} {t['kinds'] or ''}, {wall:.1f} s wall")
    if t["rss_mib"] >= 256:
        sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="alternations (ratios get a 95 %% interval from 2 on)")
    ap.add_argument("--seconds", type=int, default=5, help="measured seconds per run")
    ap.add_argument("--users-rss", action="store_true", help="only the peak RSS of one step of --users users")
    ap.add_argument("--users", type=int, default=10000, help="users for --users-rss")
    a = ap.parse_args()
    for prog in ("wrk", "taskset"):
        if shutil.which(prog) is None:
            sys.exit(f"bench/http1.py: needs {prog} (apt-get install {'wrk' if prog == 'wrk' else 'util-linux'})")
    if not os.path.exists("/usr/sbin/nginx"):
        sys.exit("bench/http1.py: needs nginx (apt-get install nginx)")
    if not os.path.exists(TPSLAB):
        sh(["cargo", "build", "--release", "-q"], cwd=ROOT)
    try:
        if a.users_rss:
            users_rss(a)
        else:
            raise_nofile(max(CONNECTIONS) + 1024)
            compare(a)
    finally:
        shutil.rmtree(OUT, ignore_errors=True)


if __name__ == "__main__":
    main()
