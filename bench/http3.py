#!/usr/bin/env python3
"""tpslab benchmark, HTTP/3: `load http --http3 --rate max` beside oha's HTTP/3, both
against the same Caddy (Debian's, quic-go; `respond "hello" 200`, pinned to CPU 1), the
clients on CPU 0, alternating oha / tpslab round by round (oha first in odd rounds).

Run from the repository:  python3 bench/http3.py [--rounds 5] [--seconds 3] [--oha PATH]

oha (built with its `http3` feature: `cargo install oha --features http3`) runs
`--http-version 3 -c C -z Ns --insecure --no-tui --output-format json`: C connections,
each one request in flight, as fast as Caddy answers. tpslab runs `load http URL --http3
--insecure --rate max --connections C --duration Ns --load-threads 1`: the same closed
loop. Each round compares tpslab's answered requests/s (over the span to its last reply)
with oha's (its 2xx replies over the -z duration: oha 1.16's HTTP/3 run then waits about
30 s more for a connection's idle timeout, which its own requests/s counts) as a ratio, and their mean latencies; beside each run
Caddy's CPU time per request answered (/proc/PID/stat), since Caddy's CPU is the limit of
both at 50 connections. Connections: 1 and 50. Prints medians (min-max) over the rounds.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import cpu_ticks, free_port, on, sh  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def default_bin():
    """$TPSLAB_BIN, else the newer of target/suite and target/release."""
    if os.environ.get("TPSLAB_BIN"):
        return os.environ["TPSLAB_BIN"]
    found = [os.path.join(ROOT, "target", p, "tpslab") for p in ("suite", "release")]
    found = [p for p in found if os.path.exists(p)]
    return max(found, key=os.path.getmtime) if found else found


TPSLAB = default_bin()
OUT = tempfile.mkdtemp(prefix="tpslab-bench-h3-")
# The benchmark's runs stay out of the user's run history.
os.environ["XDG_DATA_HOME"] = os.path.join(OUT, "history")


def udp_bound(port):
    """Whether a UDP socket is bound to `port` (/proc/net/udp, udp6)."""
    tail = f":{port:04X}"
    for name in ("/proc/net/udp", "/proc/net/udp6"):
        with open(name) as f:
            for line in list(f)[1:]:
                if line.split()[1].endswith(tail):
                    return True
    return False


def caddy(port):
    """Caddy on https://localhost:PORT (HTTP/3 on UDP), pinned to CPU 1, in a folder of its
    own (`tls internal`, no admin endpoint); returns its Popen (stopped by PID) once HTTPS
    answers with its certificate."""
    d = os.path.join(OUT, "caddy")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "Caddyfile"), "w") as f:
        f.write("{\n\tadmin off\n\tskip_install_trust\n\tauto_https disable_redirects\n"
                f"\tstorage file_system {d}/data\n\tlog {{\n\t\toutput discard\n\t}}\n}}\n"
                f"https://localhost:{port} {{\n\ttls internal\n\trespond \"hello\" 200\n}}\n")
    env = dict(os.environ, HOME=d, XDG_DATA_HOME=f"{d}/data", XDG_CONFIG_HOME=f"{d}/config")
    p = subprocess.Popen(on(1, "/usr/bin/caddy", "run", "--config", "Caddyfile", "--adapter",
                            "caddyfile"), cwd=d, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    url = f"https://localhost:{port}/"
    while True:
        ok = udp_bound(port) and subprocess.run(
            ["curl", "-sk", "--max-time", "2", url], capture_output=True).stdout == b"hello"
        if ok:
            return p
        if time.time() > deadline:
            p.kill()
            sys.exit("caddy did not start")
        time.sleep(0.1)


def oha(bin_, url, conns, secs):
    """oha's HTTP/3 closed loop: answered requests/s and mean latency (ms)."""
    out = sh(on(0, bin_, "--http-version", "3", "-c", str(conns), "-z", f"{secs}s",
                "--insecure", "--no-tui", "--output-format", "json", url),
             timeout=secs + 60).stdout
    r = json.loads(out)
    s = r["summary"]
    ok = sum(v for k, v in r.get("statusCodeDistribution", {}).items() if k.startswith("2"))
    # Over the -z duration it sent for: oha 1.16's HTTP/3 run ends about 30 s after it
    # (a connection left to QUIC's idle timeout), so its own `total` and requestsPerSec
    # count that wait too (32.0 s and 749/s for 23,992 replies in a 2 s run).
    return {"rps": ok / secs, "mean_ms": s["average"] * 1e3, "done": ok,
            "errors": sum(r.get("errorDistribution", {}).values()), "oha_total_s": s["total"]}


def tpslab(url, conns, secs):
    """tpslab load http --http3 --rate max: answered requests/s and mean latency (ms)."""
    js = os.path.join(OUT, "t.json")
    sh(on(0, TPSLAB, "load", "http", url, "--http3", "--insecure", "--rate", "max",
          "--connections", str(conns), "--load-threads", "1", "--duration", f"{secs}s",
          "--no-history", "--json", js), timeout=secs + 60)
    with open(js) as f:
        res = json.load(f)["result"]
    ok = res["status"]["s2xx"]
    span = res.get("last_end_s") or secs
    return {"rps": ok / span, "mean_ms": res["uncorrected"].get("mean_ns", 0) / 1e6,
            "done": ok, "errors": sum(res["errors"].values())}


def server_cost(cd, fn):
    """Runs `fn()` and adds Caddy's CPU time per request answered (us, 10 ms ticks)."""
    hz = os.sysconf("SC_CLK_TCK")
    c0 = cpu_ticks(cd.pid)
    r = fn()
    r["caddy_us"] = (cpu_ticks(cd.pid) - c0) / hz * 1e6 / max(r["done"], 1)
    return r


def med(xs):
    return f"{statistics.median(xs):,.3f} ({min(xs):,.3f}-{max(xs):,.3f})" if xs else "-"


def medi(xs):
    return f"{statistics.median(xs):,.0f} ({min(xs):,.0f}-{max(xs):,.0f})" if xs else "-"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--oha", default=shutil.which("oha"))
    a = ap.parse_args()
    if not a.oha or not os.path.exists(a.oha):
        sys.exit("bench/http3.py: needs oha with HTTP/3 (cargo install oha --features http3; --oha PATH)")
    if not TPSLAB or not os.path.exists(TPSLAB):
        sys.exit("bench/http3.py: build tpslab first (cargo build --profile suite, or --release)")
    port = free_port()
    cd = caddy(port)
    url = f"https://localhost:{port}/"
    try:
        print(f"tpslab {TPSLAB}; oha {a.oha}; caddy on CPU 1, clients on CPU 0; "
              f"{a.rounds} rounds of {a.seconds} s")
        for conns in (1, 50):
            rows = []
            for k in range(a.rounds):
                runs = [("oha", lambda: oha(a.oha, url, conns, a.seconds)),
                        ("tpslab", lambda: tpslab(url, conns, a.seconds))]
                if k % 2:
                    runs.reverse()
                got = {name: server_cost(cd, fn) for name, fn in runs}
                rows.append(got)
                o, t = got["oha"], got["tpslab"]
                print(f"  c={conns} round {k + 1}: oha {o['rps']:,.0f}/s mean {o['mean_ms']:.3f} ms "
                      f"(caddy {o['caddy_us']:.1f} us/req, errors {o['errors']}); tpslab "
                      f"{t['rps']:,.0f}/s mean {t['mean_ms']:.3f} ms (caddy {t['caddy_us']:.1f} "
                      f"us/req, errors {t['errors']}); ratio {t['rps'] / o['rps']:.3f}", flush=True)
            ratio = [r["tpslab"]["rps"] / r["oha"]["rps"] for r in rows]
            print(f"c={conns}: tpslab/oha requests/s {med(ratio)}; oha {medi([r['oha']['rps'] for r in rows])}/s, "
                  f"tpslab {medi([r['tpslab']['rps'] for r in rows])}/s; mean latency ms oha "
                  f"{med([r['oha']['mean_ms'] for r in rows])}, tpslab "
                  f"{med([r['tpslab']['mean_ms'] for r in rows])}; caddy us/request oha "
                  f"{med([r['oha']['caddy_us'] for r in rows])}, tpslab "
                  f"{med([r['tpslab']['caddy_us'] for r in rows])}")
    finally:
        cd.kill()
        cd.wait()


if __name__ == "__main__":
    main()
