#!/usr/bin/env python3
"""tpslab benchmark: `load http --rate max` (its closed loop: each connection, or each
HTTP/2 stream, sends its next request once the last reply is in) beside the closed loops
users run it against: wrk and oha over HTTP/1.1 at 1, 50 and 1000 connections, h2load and
oha over HTTP/2 (h2c, prior knowledge) on one connection at 1 and 100 streams. All load the
same nginx (one worker on CPU 1, a 12-byte static file; HTTP/1.1 and h2c on two ports);
every client runs on CPU 0 (tpslab `--load-threads 1`, `wrk -t 1`, `h2load -t 1`, oha's
runtime pinned there by taskset).

Run from the repository:  python3 bench/http_max.py [--rounds 5] [--seconds 3] [--oha PATH]

In each round every case runs its three tools back to back, the order rotated from round
to round (so none always goes first). Per run: requests answered 2xx per second over the
run's own span (tpslab: start to last reply, `result.last_end_s`; wrk, h2load: their
requests/s; oha: 2xx over its `summary.total`), the mean latency (ms), errors, and nginx's
CPU time per request answered (/proc/PID/stat, 10 ms ticks): the peers must load nginx
alike for their rates to compare. Prints medians (min-max) over the rounds and tpslab's
ratio to each peer as the mean of the per-round ratios with a 95 % t interval.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (ROOT, cpu_ticks, duration_ms, free_port, med, on, raise_nofile,  # noqa: E402
                    ratio_ci, sh, version, wait_listening, where)

TPSLAB = os.environ.get("TPSLAB_BIN") or os.path.join(ROOT, "target", "release", "tpslab")
OUT = tempfile.mkdtemp(prefix="tpslab-bench-max-")
# The benchmark's runs stay out of the user's run history.
os.environ["XDG_DATA_HOME"] = os.path.join(OUT, "history")
# (protocol, connections, streams per connection)
CASES = [("HTTP/1.1", 1, 1), ("HTTP/1.1", 50, 1), ("HTTP/1.1", 1000, 1),
         ("HTTP/2", 1, 1), ("HTTP/2", 1, 100)]


def nginx(h1, h2):
    """nginx, one worker pinned to CPU 1: HTTP/1.1 on port `h1`, h2c on `h2`; its Popen."""
    d = os.path.join(OUT, "nginx")
    os.makedirs(os.path.join(d, "html"), exist_ok=True)
    os.makedirs(os.path.join(d, "logs"), exist_ok=True)
    with open(os.path.join(d, "html", "index.html"), "w") as f:
        f.write("hello world\n")
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""daemon off; master_process off; worker_processes 1; pid {d}/nginx.pid;
error_log {d}/logs/error.log; worker_rlimit_nofile 8192;
events {{ worker_connections 4096; multi_accept on; }}
http {{ access_log off; keepalive_requests 100000000; keepalive_timeout 300s;
  http2_max_concurrent_streams 128;
  client_body_temp_path {d}/b; proxy_temp_path {d}/p; fastcgi_temp_path {d}/f;
  uwsgi_temp_path {d}/u; scgi_temp_path {d}/s;
  server {{ listen 127.0.0.1:{h1} backlog=4096; root {d}/html; }}
  server {{ listen 127.0.0.1:{h2} http2; root {d}/html; }} }}
""")
    p = subprocess.Popen(on(1, "/usr/sbin/nginx", "-p", d, "-c", conf), stdin=subprocess.DEVNULL)
    wait_listening(h1, p, "nginx")
    wait_listening(h2, p, "nginx")
    return p


def tpslab(url, conns, streams, http2, secs):
    """`load http --rate max`, one loop thread on CPU 0."""
    js = os.path.join(OUT, "t.json")
    cmd = [TPSLAB, "load", "http", url, "--rate", "max", "--connections", str(conns),
           "--load-threads", "1", "--duration", f"{secs}s", "--timeout", "2s",
           "--no-history", "-q", "--json", js]
    if http2:
        cmd += ["--http2", "--streams", str(streams)]
    sh(on(0, *cmd), timeout=secs + 60)
    with open(js) as f:
        res = json.load(f)["result"]
    ok = res["status"]["s2xx"]
    return {"rps": ok / (res.get("last_end_s") or secs), "done": ok,
            "mean_ms": res["uncorrected"].get("mean_ns", 0) / 1e6,
            "errors": sum(res["errors"].values()) + res["unanswered"]}


def wrk(url, conns, secs):
    """wrk -t 1 -c CONNS."""
    out = sh(on(0, "wrk", "-t", "1", "-c", str(conns), "-d", f"{secs}s", url), timeout=secs + 60).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    done = int(re.search(r"(\d+) requests in", out).group(1))
    mean = duration_ms(re.search(r"Latency\s+(\S+)", out).group(1))
    errs = 0
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if m:
        errs += sum(int(x) for x in m.groups())
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if m:
        errs += int(m.group(1))
    return {"rps": rps, "done": done, "mean_ms": mean, "errors": errs}


def h2load(url, streams, secs):
    """h2load -c 1 -t 1 -m STREAMS (h2c, prior knowledge)."""
    out = sh(on(0, "h2load", "-c", "1", "-t", "1", "-m", str(streams), "-D", str(secs), url),
             timeout=secs + 60).stdout
    rps = float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out).group(1))
    mean = duration_ms(re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)", out).group(3))
    ok = int(re.search(r"status codes: (\d+) 2xx", out).group(1))
    failed = int(re.search(r"(\d+) failed", out).group(1))
    return {"rps": rps, "done": ok, "mean_ms": mean, "errors": failed}


def oha(bin_, url, conns, streams, http2, secs):
    """oha -c CONNS [--http2 -p STREAMS] -z SECS: 2xx over its own span."""
    cmd = [bin_, "-c", str(conns), "-z", f"{secs}s", "--no-tui", "--output-format", "json"]
    if http2:
        cmd += ["--http2", "-p", str(streams)]
    r = json.loads(sh(on(0, *cmd, url), timeout=secs + 60).stdout)
    ok = sum(v for k, v in r.get("statusCodeDistribution", {}).items() if k.startswith("2"))
    errors = r.get("errorDistribution", {})
    # Requests the deadline cut off are oha's way of ending, not the server's failures.
    cut = sum(v for k, v in errors.items() if "deadline" in k)
    return {"rps": ok / r["summary"]["total"], "done": ok, "mean_ms": r["summary"]["average"] * 1e3,
            "errors": sum(errors.values()) - cut}


def with_cost(pid, fn):
    """Runs `fn()` and adds nginx's CPU time per request answered (us)."""
    hz = os.sysconf("SC_CLK_TCK")
    c0 = cpu_ticks(pid)
    r = fn()
    r["nginx_us"] = (cpu_ticks(pid) - c0) / hz * 1e6 / max(r["done"], 1)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="rounds (ratios get a 95 %% interval from 2 on)")
    ap.add_argument("--seconds", type=int, default=3, help="seconds per run")
    ap.add_argument("--oha", default=shutil.which("oha"), help="oha's binary (cargo install oha --locked)")
    a = ap.parse_args()
    for prog, pkg in (("wrk", "wrk"), ("h2load", "nghttp2-client"), ("taskset", "util-linux")):
        if shutil.which(prog) is None:
            sys.exit(f"bench/http_max.py: needs {prog} (apt-get install {pkg})")
    if not a.oha or not os.path.exists(a.oha):
        sys.exit("bench/http_max.py: needs oha (cargo install oha --locked; --oha PATH)")
    if not os.path.exists("/usr/sbin/nginx"):
        sys.exit("bench/http_max.py: needs nginx (apt-get install nginx)")
    if not os.path.exists(TPSLAB):
        sys.exit(f"bench/http_max.py: no tpslab at {TPSLAB} (cargo build --release, or TPSLAB_BIN)")
    raise_nofile(4096)
    h1, h2 = free_port(), free_port()
    ng = nginx(h1, h2)
    urls = {"HTTP/1.1": f"http://127.0.0.1:{h1}/index.html", "HTTP/2": f"http://127.0.0.1:{h2}/index.html"}
    rows = {c: [] for c in CASES}
    try:
        for rnd in range(a.rounds):
            for case in CASES:
                proto, conns, streams = case
                url, h2 = urls[proto], proto == "HTTP/2"
                peer = ("h2load", lambda: h2load(url, streams, a.seconds)) if h2 else \
                    ("wrk", lambda: wrk(url, conns, a.seconds))
                tools = [("tpslab", lambda: tpslab(url, conns, streams, h2, a.seconds)), peer,
                         ("oha", lambda: oha(a.oha, url, conns, streams, h2, a.seconds))]
                k = rnd % len(tools)
                tools = tools[k:] + tools[:k]
                got = {name: with_cost(ng.pid, fn) for name, fn in tools}
                rows[case].append(got)
                print(f"round {rnd + 1} {proto} c={conns} s={streams} ({tools[0][0]} first): " + "; ".join(
                    f"{n} {r['rps']:,.0f}/s mean {r['mean_ms']:.3f} ms nginx {r['nginx_us']:.1f} us/req "
                    f"errors {r['errors']}" for n, r in got.items()), flush=True)
    finally:
        ng.terminate()
        ng.wait(10)
        shutil.rmtree(OUT, ignore_errors=True)
    print()
    print(f"Closed loops against nginx 1 worker (CPU 1), clients on CPU 0; {a.rounds} rounds of "
          f"{a.seconds} s, tools in rotating order; median (min-max); ratio = tpslab / peer, mean of "
          f"the per-round ratios [95 % interval]")
    print(where(version(["/usr/sbin/nginx", "-v"]), version(["wrk", "-v"]).split(" [")[0],
                version(["h2load", "--version"]), version([a.oha, "--version"])))
    for case, rs in rows.items():
        proto, conns, streams = case
        names = list(rs[0])
        print(f"{proto} {conns} connection{'s' if conns > 1 else ''} x {streams} stream{'s' if streams > 1 else ''}:")
        for n in names:
            print(f"  {n:>7}: {med([r[n]['rps'] for r in rs]):>26} req/s, mean "
                  f"{med([r[n]['mean_ms'] for r in rs], '{:,.3f}'):>24} ms, nginx "
                  f"{med([r[n]['nginx_us'] for r in rs], '{:,.1f}'):>20} us/req, errors max "
                  f"{max(r[n]['errors'] for r in rs)}")
        for n in names[1:]:
            print(f"  tpslab / {n}: {ratio_ci([(r['tpslab']['rps'], r[n]['rps']) for r in rs])} req/s; "
                  f"median ratio {statistics.median([r['tpslab']['rps'] / r[n]['rps'] for r in rs]):.3f}")


if __name__ == "__main__":
    main()
