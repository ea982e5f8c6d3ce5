#!/usr/bin/env python3
"""tpslab benchmark: tpslab's hot path side by side with iperf3, sockperf and the
kernel-limit programs of ../shared/limits, interleaved A/B/A/B in one run.

Run as root from the repository:  python3 bench/run.py [--rounds 5] [--seconds 3] [--long 60]

Everything runs inside a private network namespace on loopback; senders are pinned to
CPU 0 and receivers to CPU 1. Prints medians with min-max and ratios against each peer;
appends the raw results to bench/results/results.csv with the machine's description.
Request/response: tpslab (open loop at a fixed rate and at max, and closed loop with
`ramp udp`) against dnsperf, both querying the same local unbound (one thread, CPU 1);
`ramp tcp` against redis-benchmark, both sending inline PINGs to one redis-server, at 1, 50
and 1000 clients; one ramp step of 10,000 TCP users. Every ratio is the mean of the
per-round ratios with its 95 % interval.
"""

import argparse
import csv
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The kernel-limit programs' sources (TPSLAB_LIMITS=DIR when the repository is not beside them).
LIMITS = os.environ.get("TPSLAB_LIMITS") or os.path.join(ROOT, "..", "shared", "limits")
NS = f"tpsbench{os.getpid()}"
OUT = tempfile.mkdtemp(prefix="tpslab-bench-")
TPSLAB = os.environ.get("TPSLAB_BIN") or os.path.join(ROOT, "target", "release", "tpslab")
# The benchmark's own runs stay out of the user's run history (tpslab history): every
# tpslab started here keeps it in a folder of its own, removed at the end.
import atexit  # noqa: E402
_HISTORY = tempfile.mkdtemp(prefix="tpslab-bench-history-")
os.environ["XDG_DATA_HOME"] = _HISTORY
atexit.register(shutil.rmtree, _HISTORY, True)


def sh(cmd, timeout=900, **kw):
    """Runs a command to completion (bounded: a stuck peer ends the benchmark with an error)."""
    return subprocess.run(cmd, check=True, text=True, capture_output=True, timeout=timeout, **kw)


def ns(*cmd):
    return ["ip", "netns", "exec", NS, *cmd]


def on(cpu, *cmd):
    return ["taskset", "-c", str(cpu), *cmd]


def setup():
    if os.geteuid() != 0:
        sys.exit("bench/run.py: needs root (network namespace, CPU pinning)")
    pkgs = {"iperf3": "iperf3", "sockperf": "sockperf", "dnsperf": "dnsperf", "unbound": "unbound",
            "redis-server": "redis-server", "redis-benchmark": "redis-tools"}
    need = [pkg for p, pkg in pkgs.items() if shutil.which(p) is None and not os.path.exists("/usr/sbin/" + p)]
    if need:
        sh(["apt-get", "update", "-qq"])
        sh(["apt-get", "install", "-y", "-qq", *need], env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    sh(["cargo", "build", "--release", "-q"], cwd=ROOT)
    for prog, extra in (("udpsend", ["-pthread"]), ("udprecv", [])):
        sh(["gcc", "-O2", *extra, "-o", os.path.join(OUT, prog), os.path.join(LIMITS, prog + ".c")])
    sh(["ip", "netns", "add", NS])
    sh(["ip", "-n", NS, "link", "set", "lo", "up"])


def teardown():
    subprocess.run(["ip", "netns", "del", NS], capture_output=True)
    shutil.rmtree(OUT, ignore_errors=True)


class Bg:
    """A background receiver started in the namespace, stopped by its PID."""

    def __init__(self, cmd):
        self.p = subprocess.Popen(ns(*cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(0.4)

    def stop(self, wait_s=5):
        try:
            out, _ = self.p.communicate(timeout=wait_s)
        except subprocess.TimeoutExpired:
            self.p.terminate()
            out, _ = self.p.communicate(timeout=5)
        return out


def udprecv(port, secs):
    return Bg(on(1, os.path.join(OUT, "udprecv"), "-p", str(port), "-m", "recvmmsg", "-b", "64",
                 "-R", "16000000", "-t", str(secs + 3), "-i", "1"))


def recv_pps(out):
    m = re.search(r" pps=(\d+)", out.splitlines()[-1])
    return float(m.group(1)) if m else 0.0


def tpslab_oneway(size, secs, port):
    r = udprecv(port, secs)
    js = os.path.join(OUT, "oneway.json")
    sh(ns(*on(0, TPSLAB, "load", "udp", f"127.0.0.1:{port}", "--rate", "max", "--no-replies", "--size",
              str(size), "--duration", f"{secs}s", "--warmup", "0s", "--json", js)))
    g = json.load(open(js))["generator"]
    return {"sent_pps": g["achieved_pps"], "recv_pps": recv_pps(r.stop())}


def tpslab_gso_oneway(size, secs, port):
    """tpslab --gso into tpslab serve --gro (sink): datagrams delivered per second."""
    js = os.path.join(OUT, "gso-serve.json")
    srv = Bg(on(1, TPSLAB, "serve", "udp", "--bind", f"127.0.0.1:{port}", "--mode", "sink", "--gro", "--batch", "64",
                "--rcvbuf", "64000000", "--duration", f"{secs + 2}s", "--json", js))
    lj = os.path.join(OUT, "gso-load.json")
    sh(ns(*on(0, TPSLAB, "load", "udp", f"127.0.0.1:{port}", "--rate", "max", "--gso", "--no-replies", "--size",
              str(size), "--duration", f"{secs}s", "--warmup", "0s", "--json", lj)))
    srv.stop(wait_s=secs + 10)
    g = json.load(open(lj))["generator"]
    got = json.load(open(js))["server"]["received"]
    return {"sent_pps": g["achieved_pps"], "recv_pps": got / secs, "loss_pct": 100 * (1 - got / max(g["sent"], 1))}


def udpsend_oneway(size, secs, port):
    r = udprecv(port, secs)
    out = sh(ns(*on(0, os.path.join(OUT, "udpsend"), "-a", "127.0.0.1", "-p", str(port), "-s", str(size),
                    "-t", str(secs), "-m", "sendmmsg", "-b", "64"))).stdout
    return {"sent_pps": float(re.search(r" pps=(\d+)", out).group(1)), "recv_pps": recv_pps(r.stop())}


def iperf3_oneway(size, secs, port):
    srv = Bg(on(1, "iperf3", "-s", "-1", "-p", str(port)))
    out = sh(ns(*on(0, "iperf3", "-u", "-b", "0", "-l", str(size), "-t", str(secs), "-c", "127.0.0.1", "-p",
                    str(port), "--json"))).stdout
    srv.stop()
    end = json.loads(out)["end"]
    sent = end["sum"]["packets"] / end["sum"]["seconds"]
    lost = end["sum"].get("lost_percent", 0.0)
    return {"sent_pps": sent, "recv_pps": sent * (1 - lost / 100)}


def sockperf_oneway(size, secs, port):
    srv = Bg(on(1, "sockperf", "server", "-i", "127.0.0.1", "-p", str(port)))
    out = sh(ns(*on(0, "sockperf", "throughput", "-i", "127.0.0.1", "-p", str(port), "-m", str(size),
                    "-t", str(secs)))).stdout
    srv.p.terminate()
    srv.stop()
    rate = float(re.search(r"Message Rate is (\d+)", out).group(1))
    return {"sent_pps": rate, "recv_pps": float("nan")}


def cpu_ns(pid):
    """CPU time of every thread of `pid` so far (schedstat, ns)."""
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(open(f"/proc/{pid}/task/{t}/schedstat").read().split()[0])
        except (OSError, ValueError):
            pass
    return total


def rmem_max():
    return int(open("/proc/sys/net/core/rmem_max").read())


def server_recv(size, secs, port, which):
    """udpsend at full speed into tpslab serve (sink, recvmmsg 64) or into udprecv, both
    with the same receive buffer (16 MB asked, capped at net.core.rmem_max: udprecv cannot
    force more, tpslab is told no more). On loopback the sender's CPU does the protocol
    work and the receiver only copies, so one sender rarely outruns a receiver and the
    received rate is mostly the sender's: the receiver's own cost is its CPU time (every
    thread, schedstat) per datagram read, capacity = datagrams per CPU second."""
    buf = str(min(16000000, rmem_max()))
    if which == "tpslab":
        js = os.path.join(OUT, "serve.json")
        srv = Bg(on(1, TPSLAB, "serve", "udp", "--bind", f"127.0.0.1:{port}", "--mode", "sink", "--batch", "64",
                    "--rcvbuf", buf, "--duration", f"{secs + 1}s", "--json", js))
    else:
        srv = Bg(on(1, os.path.join(OUT, "udprecv"), "-p", str(port), "-m", "recvmmsg", "-b", "64",
                    "-R", buf, "-t", str(secs + 3), "-i", "1"))
    c0 = cpu_ns(srv.p.pid)
    out = sh(ns(*on(0, os.path.join(OUT, "udpsend"), "-a", "127.0.0.1", "-p", str(port), "-s", str(size),
                    "-t", str(secs), "-m", "sendmmsg", "-b", "64"))).stdout
    time.sleep(0.05)
    c1 = cpu_ns(srv.p.pid)
    sent = int(re.search(r"sent=(\d+)", out).group(1))
    rout = srv.stop(wait_s=secs + 10)
    got = json.load(open(js))["server"]["received"] if which == "tpslab" else int(re.search(r"received=(\d+)", rout).group(1))
    return {"sent_pps": sent / secs, "recv_pps": got / secs, "delivered_pct": 100 * got / max(sent, 1),
            "cpu_ns_per_datagram": (c1 - c0) / max(got, 1), "per_cpu_second": got / max((c1 - c0) / 1e9, 1e-9)}


UNBOUND_CONF = """server:
    interface: 127.0.0.1@{port}
    do-daemonize: no
    chroot: ""
    username: ""
    directory: "{dir}"
    pidfile: ""
    use-syslog: no
    logfile: ""
    num-threads: 1
    access-control: 127.0.0.0/8 allow
    do-ip6: no
    so-rcvbuf: 4m
    local-zone: "bench.test." static
    local-data: "q.bench.test. A 127.0.0.1"
remote-control:
    control-enable: no
"""


def dns_files():
    q = bytes([0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0])
    for label in ("q", "bench", "test"):
        q += bytes([len(label)]) + label.encode()
    q += bytes([0, 0, 1, 0, 1])
    qf, df = os.path.join(OUT, "q.bin"), os.path.join(OUT, "dnsperf.txt")
    open(qf, "wb").write(q)
    open(df, "w").write("q.bench.test A\n")
    return qf, df


def unbound(port):
    conf = os.path.join(OUT, f"unbound-{port}.conf")
    open(conf, "w").write(UNBOUND_CONF.format(port=port, dir=OUT))
    unb = shutil.which("unbound") or "/usr/sbin/unbound"
    srv = Bg(on(1, unb, "-d", "-c", conf))
    # Ready when it answers a query (up to 10 s), not after a guessed sleep.
    qf, _ = dns_files()
    probe = ("import socket,sys;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.settimeout(0.2);"
             "q=open(sys.argv[1],'rb').read();import time;end=time.time()+10\n"
             "while time.time()<end:\n"
             " try:\n  s.sendto(q,('127.0.0.1',int(sys.argv[2])));s.recv(512);sys.exit(0)\n"
             " except OSError: time.sleep(0.1)\n"
             "sys.exit(1)")
    try:
        sh(ns(sys.executable, "-c", probe, qf, str(port)), timeout=20)
    except Exception:
        srv.p.terminate()
        srv.stop()
        raise
    return srv


def dns_rr(tool, rate, secs, port):
    """QPS answered and loss % of one tool against a fresh unbound. rate: pps, or None for
    as fast as the tool goes (dnsperf: its default 100 outstanding queries; tpslab-open:
    --rate max; tpslab-closed: ramp udp with 100 users, one request out each)."""
    qf, df = dns_files()
    srv = unbound(port)
    try:
        if tool == "dnsperf":
            cmd = ["dnsperf", "-s", "127.0.0.1", "-p", str(port), "-d", df, "-l", str(secs), "-c", "1", "-T", "1"]
            if rate:
                cmd += ["-Q", str(rate)]
            out = sh(ns(*on(0, *cmd))).stdout
            sent = int(re.search(r"Queries sent:\s+(\d+)", out).group(1))
            lost = int(re.search(r"Queries lost:\s+(\d+)", out).group(1))
            qps = float(re.search(r"Queries per second:\s+([\d.]+)", out).group(1))
            return {"qps": qps, "loss_pct": 100 * lost / max(sent, 1)}
        js = os.path.join(OUT, "dns.json")
        if tool == "tpslab-closed":
            sh(ns(*on(0, TPSLAB, "ramp", "udp", f"127.0.0.1:{port}", "--payload-file", qf, "--seq-field", "0:2",
                      "--users", "100..100", "--warmup", "500ms", "--step-duration", f"{secs}s", "--load-threads", "1",
                      "--no-history", "--json", js)))
            st = json.load(open(js))["steps"][0]
            errs = sum(st["errors"].values())
            return {"qps": st["tps"], "loss_pct": 100 * errs / max(st["completed"] + errs, 1)}
        sh(ns(*on(0, TPSLAB, "load", "udp", f"127.0.0.1:{port}", "--payload-file", qf, "--seq-field", "0:2",
                  "--rate", str(rate) if rate else "max", "--duration", f"{secs}s", "--json", js)))
        g = json.load(open(js))["generator"]
        return {"qps": g["tps"], "loss_pct": g["window_loss_pct"], "sent_pps": g["achieved_pps"]}
    finally:
        srv.p.terminate()
        srv.stop()


def redis_server(port):
    """Debian's redis-server on CPU 1 (no persistence, room for 20,000 clients), ready when
    it answers PING."""
    srv = Bg(on(1, "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--maxclients", "20000", "--daemonize", "no", "--protected-mode", "no"))
    end = time.time() + 10
    while time.time() < end:
        r = subprocess.run(ns("redis-cli", "-p", str(port), "ping"), capture_output=True, text=True)
        if r.stdout.strip() == "PONG":
            return srv
        time.sleep(0.1)
    srv.p.terminate()
    srv.stop()
    raise RuntimeError("redis-server did not answer PING within 10 s")


def redis_rr(tool, clients, secs, port):
    """Inline PING against a fresh redis-server at `clients` concurrent connections, one
    request out each: redis-benchmark -t ping_inline (1 thread, as many requests as it
    does in about `secs` here; its clock includes its connects) against tpslab ramp tcp
    with `PING\\r\\n` as the payload, --framing delim:\\r\\n and --load-threads 1 (one
    step, after a 1 s warm-up). QPS, p50 and p99 in ms."""
    srv = redis_server(port)
    try:
        if tool == "redis-benchmark":
            n = int(secs * (12000 if clients == 1 else 120000))
            out = sh(ns(*on(0, "redis-benchmark", "-p", str(port), "-t", "ping_inline", "-c", str(clients), "-n",
                            str(n), "-q", "--csv"))).stdout
            row = list(csv.reader(out.strip().splitlines()))[-1]
            return {"qps": float(row[1]), "p50_ms": float(row[4]), "p99_ms": float(row[6])}
        ping = os.path.join(OUT, "ping.bin")
        open(ping, "wb").write(b"PING\r\n")
        js = os.path.join(OUT, "redis.json")
        sh(ns(*on(0, TPSLAB, "ramp", "tcp", f"127.0.0.1:{port}", "--payload-file", ping, "--framing", "delim:\\r\\n",
                  "--users", f"{clients}..{clients}", "--warmup", "1s", "--step-duration", f"{secs}s",
                  "--load-threads", "1", "--no-history", "--json", js, "-q")))
        st = json.load(open(js))["steps"][0]
        errs = sum(st["errors"].values())
        return {"qps": st["tps"], "p50_ms": st["response"]["p50_ns"] / 1e6, "p99_ms": st["response"]["p99_ns"] / 1e6,
                "errors": errs}
    finally:
        srv.p.terminate()
        srv.stop()


def ten_thousand_users(secs):
    """One ramp step of 10,000 TCP users against tpslab's own echo server (2 threads, no
    serial section): TPS, p50/p99, errors and the generator's peak RSS."""
    js = os.path.join(OUT, "tenk.json")
    t = time.monotonic()
    sh(ns(TPSLAB, "ramp", "tcp", "--users", "10000..10000", "--step", "+1", "--step-duration", f"{secs}s",
          "--warmup", "4s", "--server-threads", "2", "--server-serial", "0s", "--no-history", "--json", js, "-q"))
    wall = time.monotonic() - t
    r = json.load(open(js))
    st = r["steps"][0]
    return {"tps": st["tps"], "p50_ms": st["response"]["p50_ns"] / 1e6, "p99_ms": st["response"]["p99_ns"] / 1e6,
            "errors": sum(st["errors"].values()), "peak_rss_mib": r["generator_peak_rss_kib"] / 1024, "wall_s": wall}


SLEEP_FLOOR_C = r"""
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>
/* The machine's floor for pacing by sleeping: N absolute sleeps per second, nothing else. */
int main(int argc, char **argv) {
    long per = 1000000000L / atol(argv[1]);
    long n = atol(argv[1]) * atol(argv[2]);
    prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0);
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    for (long i = 0; i < n; i++) {
        t.tv_nsec += per;
        if (t.tv_nsec >= 1000000000L) { t.tv_nsec -= 1000000000L; t.tv_sec++; }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, 0);
    }
    return 0;
}
"""


def pacing(rate, secs, port, slack="0s"):
    """tpslab load at a fixed rate into a sink (with a --pacing-slack: 0s, 1ms or auto):
    achieved rate error, schedule lag p99, the slack used (auto's choice), and the CPU of
    the load process (its observer at 100 ms); beside it
    the CPU of a bare C loop doing one absolute sleep per datagram (the machine's floor for
    sleep pacing)."""
    srv = Bg(on(1, TPSLAB, "serve", "udp", "--mode", "sink", "--bind", f"127.0.0.1:{port}", "--duration",
                f"{secs + 10}s"))
    js = os.path.join(OUT, "pacing.json")
    try:
        cpu, wall = rusage_of(ns(*on(0, TPSLAB, "load", "udp", f"127.0.0.1:{port}", "--rate", str(rate),
                                     "--no-replies", "--duration", f"{secs}s", "--warmup", "0s", "--interval", "100ms",
                                     "--pacing-slack", slack, "--json", js)))
    finally:
        srv.p.terminate()
        srv.stop()
    g = json.load(open(js))["generator"]
    floor = os.path.join(OUT, "sleepfloor")
    if not os.path.exists(floor):
        open(floor + ".c", "w").write(SLEEP_FLOOR_C)
        sh(["gcc", "-O2", "-o", floor, floor + ".c"])
    fcpu, fwall = rusage_of(on(0, floor, str(rate), str(secs)))
    return {"rate_error_pct": 100 * (g["achieved_pps"] - rate) / rate, "lag_p99_us": g["schedule_lag"]["p99_ns"] / 1e3,
            "slack_us": g.get("pacing_slack_ns", 0) / 1e3,
            "cpu_pct_of_core": 100 * cpu / wall, "sleep_floor_cpu_pct": 100 * fcpu / fwall}


def tpslab_pingpong(secs):
    js = os.path.join(OUT, "pp.json")
    sh(ns(TPSLAB, "run", "udp", "--mode", "echo", "--cpus", "1", "--load-cpus", "0", "--rate", "10000", "--size",
          "64", "--duration", f"{secs}s", "--warmup", "500ms", "--json", js))
    g = json.load(open(js))["generator"]
    lat, wake = g["latency_actual"], g["latency_wakeup"]
    # p50/p99 to tpslab's thread waking up: like for like with sockperf; kernel_*: to the
    # kernel's receive timestamp (without the generator's own wake-up).
    return {"p50_us": wake["p50_ns"] / 1e3, "p99_us": wake["p99_ns"] / 1e3,
            "kernel_p50_us": lat["p50_ns"] / 1e3, "kernel_p99_us": lat["p99_ns"] / 1e3}


def sockperf_pingpong(secs, port):
    srv = Bg(on(1, "sockperf", "server", "-i", "127.0.0.1", "-p", str(port)))
    out = sh(ns(*on(0, "sockperf", "ping-pong", "-i", "127.0.0.1", "-p", str(port), "-m", "64", "-t", str(secs),
                    "--mps", "10000", "--full-rtt"))).stdout
    srv.p.terminate()
    srv.stop()
    pct = lambda p: float(re.search(rf"percentile {p} =\s+([\d.]+)", out).group(1))
    return {"p50_us": pct("50.000"), "p99_us": pct("99.000")}


def rusage_of(cmd):
    """CPU seconds and wall seconds of one command, measured by a fresh wrapper process so
    that only this command counts (not cargo, gcc or the peers run by this script)."""
    probe = ("import resource,subprocess,sys,time;t=time.monotonic();"
             "subprocess.run(sys.argv[1:],check=True,capture_output=True);w=time.monotonic()-t;"
             "r=resource.getrusage(resource.RUSAGE_CHILDREN);print(r.ru_utime+r.ru_stime,w)")
    out = sh([sys.executable, "-c", probe, *cmd]).stdout.split()
    return float(out[0]), float(out[1])


def observer_cost(interval, secs, port, reasons=True, live=False):
    """Steady CPU of `tpslab watch` following a server socket and its threads (with or
    without sampling the kernel's drop reasons; with `live`, drawing `--live` on a 160x48
    pseudo-terminal that `script` holds, whose CPU counts too): the difference of a short
    and a long run, so start-up and the final report cancel out."""
    srv = Bg([TPSLAB, "serve", "udp", "--bind", f"127.0.0.1:{port}", "--duration", f"{2 * secs + 10}s"])
    off = ([] if reasons else ["--no-drop-reasons"]) + (["--live"] if live else [])
    watch = lambda d: ns(TPSLAB, "watch", "--pid", str(srv.p.pid), "--port", str(port), "--interval", interval,
                         "--duration", f"{d}s", *off)
    pty = lambda c: ["script", "-qec", "stty cols 160 rows 48; exec " + shlex.join(c), "/dev/null"]
    cmd = lambda d: pty(watch(d)) if live else watch(d)
    c1, w1 = rusage_of(cmd(1))
    c2, w2 = rusage_of(cmd(1 + secs))
    srv.p.terminate()
    srv.stop()
    return {"cpu_pct_of_core": 100 * (c2 - c1) / (w2 - w1)}


def drop_storm(secs, port, reasons):
    """The kernel-limit sender (CPU 0) at full speed to a port nobody listens on, in the
    namespace: every datagram is a NO_SOCKET drop, each one an `skb:kfree_skb` event.
    Beside it `tpslab watch` (CPU 1) follows a server, sampling drop reasons or not
    (--no-drop-reasons). Returns the sender's rate (the dropping path's cost), the watch's
    CPU (its reader thread drains one perf record per drop) and, with reasons, the share of
    sent datagrams the watch counted as NO_SOCKET and the samples it lost."""
    srv = Bg(on(1, TPSLAB, "serve", "udp", "--bind", f"127.0.0.1:{port}", "--duration", f"{secs + 10}s"))
    js = os.path.join(OUT, "storm-watch.json")
    off = [] if reasons else ["--no-drop-reasons"]
    probe = ("import resource,subprocess,sys,time;t=time.monotonic();"
             "subprocess.run(sys.argv[1:],check=True,capture_output=True);w=time.monotonic()-t;"
             "r=resource.getrusage(resource.RUSAGE_CHILDREN);print(r.ru_utime+r.ru_stime,w)")
    watch = subprocess.Popen([sys.executable, "-c", probe, *ns(*on(1, TPSLAB, "watch", "--pid", str(srv.p.pid),
                              "--port", str(port), "--duration", f"{secs + 1}s", "--json", js, *off))],
                             stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    out = sh(ns(*on(0, os.path.join(OUT, "udpsend"), "-a", "127.0.0.1", "-p", str(port + 1), "-s", "64",
                    "-t", str(secs), "-m", "sendmmsg", "-b", "64"))).stdout
    cpu, wall = (float(x) for x in watch.communicate(timeout=secs + 30)[0].split())
    srv.p.terminate()
    srv.stop()
    pps = float(re.search(r" pps=(\d+)", out).group(1))
    res = {"sender_pps": pps, "watch_cpu_pct_of_core": 100 * cpu / wall}
    if reasons:
        dr = json.load(open(js))["drop_reasons"]
        seen = dict((k, v) for k, v in dr.get("by_reason", [])).get("NO_SOCKET", 0)
        res["no_socket_seen_pct_of_sent"] = 100 * seen / max(pps * secs, 1)
        res["samples_lost"] = dr.get("lost", 0)
    return res


def peak_rss(secs):
    js = os.path.join(OUT, "rss.json")
    sh(ns(TPSLAB, "run", "udp", "--rate", "max", "--size", "1024", "--no-replies", "--batch", "64", "--cpus", "1",
          "--load-cpus", "0", "--duration", f"{secs}s", "--warmup", "0s", "--json", js))
    return {"peak_rss_mib": json.load(open(js))["peak_rss_kib"] / 1024}


SERIES = [20, 120]
SERIES_MS = 1


def series_rss(secs, interval_ms=1):
    """Peak RSS of a light run observed every `interval_ms` for `secs` (at 1 ms, 120 s is as
    many samples as 20 minutes at 10 ms), and its resident memory read from
    /proc/PID/status every 5 s: flat once the sample series reaches its bound."""
    js = os.path.join(OUT, f"rss-series-{secs}.json")
    p = subprocess.Popen(ns(TPSLAB, "run", "udp", "--rate", "1000", "--size", "200", "--cpus", "1",
                            "--load-cpus", "0", "--duration", f"{secs}s", "--warmup", "0s",
                            "--interval", f"{interval_ms}ms", "--json", js),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    track = []  # (seconds since start, VmRSS MiB); `ip netns exec` execs tpslab: same PID
    t0 = time.time()
    while p.poll() is None and time.time() - t0 < secs + 120:
        try:
            # Until `ip netns exec` has exec'd tpslab the PID is a 4 KiB child of python's.
            if open(f"/proc/{p.pid}/comm").read().strip() == "tpslab":
                for line in open(f"/proc/{p.pid}/status"):
                    if line.startswith("VmRSS:"):
                        track.append((time.time() - t0, int(line.split()[1]) / 1024))
        except OSError:
            pass
        time.sleep(5 if track else 0.05)
    if p.poll() is None:
        p.kill()
        sys.exit(f"bench/run.py: the {secs} s run did not end")
    rec = json.load(open(js))
    out = {"peak_rss_mib": rec["peak_rss_kib"] / 1024, "samples_kept": rec["observer"]["samples"]}
    for q in (25, 50, 75, 100):
        at = [m for t, m in track if t <= secs * q / 100]
        if at:
            out[f"rss_at_{q}pct_mib"] = at[-1]
    return out


def summary(xs):
    xs = [x for x in xs if x == x]
    if not xs:
        return "-"
    return f"{statistics.median(xs):,.0f} ({min(xs):,.0f}-{max(xs):,.0f})"


def median(xs):
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")


# Two-sided 95 % Student t quantiles by degrees of freedom (1..30; above: the normal's).
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def ratio_ci(a_by_round, b_by_round):
    """The ratio a/b paired by round (both measured in the same round): (mean, low, high,
    n) with a 95 % t interval of the per-round ratios; None with fewer than 2 rounds."""
    rs = [a_by_round[k] / b_by_round[k] for k in sorted(a_by_round) if k in b_by_round and b_by_round[k]]
    rs = [r for r in rs if r == r]
    if len(rs) < 2:
        return None
    m, sd = statistics.mean(rs), statistics.stdev(rs)
    t = T975[len(rs) - 2] if len(rs) - 1 <= len(T975) else 1.96
    h = t * sd / len(rs) ** 0.5
    return m, m - h, m + h, len(rs)


def fmt_ci(ci):
    return "-" if ci is None else f"{ci[0]:.2f}x [{ci[1]:.2f}, {ci[2]:.2f}]"


def closed_loop_rows(rows, rnd, seconds, port, dns=True):
    """The closed loop against its peers in round `rnd` (order rotated each round): ramp
    udp (100 users) against dnsperf (100 outstanding) on one unbound, and ramp tcp against
    redis-benchmark on one redis-server at 1, 50 and 1000 clients. Returns the next port."""
    runs = [("redis", t, c) for c in (1, 50, 1000) for t in ("tpslab-closed", "redis-benchmark")]
    if dns:
        runs += [("dns", "tpslab-closed", None), ("dns", "dnsperf", None)]
    runs = runs[rnd % len(runs):] + runs[: rnd % len(runs)]
    for kind, tool, clients in runs:
        port += 1
        if kind == "dns":
            for k, v in dns_rr(tool, None, seconds, port).items():
                rows.append(("dns-rr-max", tool, 0, k, v, rnd))
        else:
            for k, v in redis_rr(tool, clients, seconds, port).items():
                rows.append(("redis-ping", tool, clients, k, v, rnd))
    return port


def pacing_rows(rows, rnd, seconds, port):
    """Pacing at 100 k and 10 k pps: exact, with a 1 ms slack and auto (the default),
    rotating which goes first. Returns the next port."""
    for rate in (100000, 10000):
        slacks = ("0s", "1ms", "auto")
        for slack in slacks[rnd % 3:] + slacks[:rnd % 3]:
            port += 1
            tool = "tpslab" if slack == "0s" else f"tpslab-slack-{slack}"
            for k, v in pacing(rate, seconds, port, slack).items():
                rows.append(("pacing", tool, rate, k, v, rnd))
    return port


def observer_rows(rows, rnd, seconds, port):
    """The observer's cost in round `rnd`, with and without drop reasons (alternating which
    goes first): idle at 10 ms and 1 ms, and beside a drop storm. Returns the next port."""
    for iv in ("10ms", "1ms"):
        for reasons in ((True, False) if rnd % 2 == 0 else (False, True)):
            port += 1
            tool = "tpslab" if reasons else "tpslab-no-reasons"
            for k, v in observer_cost(iv, seconds * 3, port, reasons).items():
                rows.append((f"observer-{iv}", tool, 0, k, v, rnd))
    # The live view beside the same watch at 10 ms (drop reasons sampled).
    port += 1
    for k, v in observer_cost("10ms", seconds * 3, port, True, live=True).items():
        rows.append(("observer-10ms", "tpslab-live", 0, k, v, rnd))
    for reasons in ((True, False) if rnd % 2 == 0 else (False, True)):
        port += 2
        tool = "tpslab" if reasons else "tpslab-no-reasons"
        for k, v in drop_storm(seconds, port, reasons).items():
            rows.append(("drop-storm", tool, 64, k, v, rnd))
    return port


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5, help="alternations (ratios get a 95 %% interval from 2 on)")
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--long", type=int, default=60, help="seconds of the peak-RSS run (0: skip)")
    ap.add_argument("--memory-only", action="store_true",
                    help="only the memory figures: peak RSS at --rate max, and with the observer sampling for each --series length")
    ap.add_argument("--series", default="20,120",
                    help="lengths in seconds of the observed runs whose peak RSS is compared (e.g. 20,600)")
    ap.add_argument("--series-interval", type=int, default=1, help="their sampling interval, ms")
    ap.add_argument("--pacing-only", action="store_true",
                    help="only pacing: 100 k and 10 k pps, exact, with --pacing-slack 1ms and auto (the default)")
    ap.add_argument("--observer-only", action="store_true",
                    help="only the observer's cost: idle at 10 ms and 1 ms, and beside a drop storm, with and without drop reasons")
    ap.add_argument("--closed-loop-only", action="store_true",
                    help="only the closed loop: ramp udp vs dnsperf, ramp tcp vs redis-benchmark at 1/50/1000 clients, a 10,000-user step")
    ap.add_argument("--server-only", action="store_true",
                    help="only the reference server's receive against the kernel-limit receiver")
    ap.add_argument("--oneway-only", action="store_true",
                    help="only the one-way comparison (tpslab, kernel-limit, iperf3, sockperf, GSO at 64 and 1024 B): "
                         "cheap enough for the many rounds a noisy host needs for its intervals")
    ap.add_argument("--tenk", type=int, default=3, help="seconds of the 10,000-user ramp step (0: skip)")
    a = ap.parse_args()
    global SERIES, SERIES_MS
    SERIES = [int(x) for x in a.series.split(",")]
    SERIES_MS = a.series_interval
    setup()
    rows = []  # (test, tool, size, metric, value, round)
    try:
        port = 20000
        only = a.observer_only or a.pacing_only or a.closed_loop_only or a.server_only or a.oneway_only
        for secs in [] if only else SERIES:
            for k, v in series_rss(secs, a.series_interval).items():
                rows.append(("memory-series", "tpslab", secs, k, v, 0))
        for rnd in range(0 if a.memory_only else a.rounds):
            for size in (64, 1024) if a.oneway_only or not only else ():
                tools = [("tpslab", tpslab_oneway), ("kernel-limit", udpsend_oneway), ("iperf3", iperf3_oneway),
                         ("sockperf", sockperf_oneway), ("tpslab-gso", tpslab_gso_oneway)]
                # Interleave: rotate the order each round so drift does not favour one tool.
                tools = tools[rnd % len(tools):] + tools[: rnd % len(tools)]
                for name, fn in tools:
                    port += 1
                    for k, v in fn(size, a.seconds, port).items():
                        rows.append(("one-way", name, size, k, v, rnd))
                for which in () if a.oneway_only else (("tpslab", "kernel-limit") if rnd % 2 == 0 else ("kernel-limit", "tpslab")):
                    port += 1
                    for k, v in server_recv(size, a.seconds, port, which).items():
                        rows.append(("server-recv", which, size, k, v, rnd))
            if only:
                if a.observer_only:
                    port = observer_rows(rows, rnd, a.seconds, port)
                if a.pacing_only:
                    port = pacing_rows(rows, rnd, a.seconds, port)
                if a.closed_loop_only:
                    port = closed_loop_rows(rows, rnd, a.seconds, port)
                if a.server_only:
                    for size in (64, 1024):
                        for which in (("tpslab", "kernel-limit") if rnd % 2 == 0 else ("kernel-limit", "tpslab")):
                            port += 1
                            for k, v in server_recv(size, a.seconds, port, which).items():
                                rows.append(("server-recv", which, size, k, v, rnd))
                continue
            for name in (("tpslab", "sockperf") if rnd % 2 == 0 else ("sockperf", "tpslab")):
                port += 1
                res = tpslab_pingpong(a.seconds) if name == "tpslab" else sockperf_pingpong(a.seconds, port)
                for k, v in res.items():
                    rows.append(("ping-pong", name, 64, k, v, rnd))
            rr = [("tpslab", r) for r in (50000, 140000, None)] + [("dnsperf", r) for r in (50000, 140000, None)]
            rr.append(("tpslab-closed", None))
            rr = rr[rnd % len(rr):] + rr[: rnd % len(rr)]
            for tool, rate in rr:
                port += 1
                for k, v in dns_rr(tool, rate, a.seconds, port).items():
                    rows.append((f"dns-rr-{rate or 'max'}", tool, 0, k, v, rnd))
            port = closed_loop_rows(rows, rnd, a.seconds, port, dns=False)
            port = pacing_rows(rows, rnd, a.seconds, port)
            port = observer_rows(rows, rnd, a.seconds, port)
        if a.tenk and (a.closed_loop_only or not only):
            for k, v in ten_thousand_users(a.tenk).items():
                rows.append(("ramp-10k", "tpslab-closed", 10000, k, v, 0))
        if a.long and not only:
            for k, v in peak_rss(a.long).items():
                rows.append(("memory", "tpslab", 1024, k, v, 0))
    finally:
        teardown()
    # The raw results first: a report that fails to print loses nothing.
    save(rows)
    report(rows, a.memory_only, a.observer_only, a.pacing_only, a.closed_loop_only, a.server_only, a.oneway_only)


def report(rows, memory_only=False, observer_only=False, pacing_only=False, closed_loop_only=False, server_only=False,
           oneway_only=False):
    def vals(test, tool, size, metric):
        return [r[4] for r in rows if r[:4] == (test, tool, size, metric)]

    def byr(test, tool, size, metric):
        return {r[5]: r[4] for r in rows if r[:4] == (test, tool, size, metric)}

    if closed_loop_only:
        closed_loop_report(vals, byr)
        return
    if server_only:
        server_report(vals, byr)
        return

    def observer():
        for iv in ("10ms", "1ms"):
            c = vals(f"observer-{iv}", "tpslab", 0, "cpu_pct_of_core")
            n = vals(f"observer-{iv}", "tpslab-no-reasons", 0, "cpu_pct_of_core")
            if c:
                print(f"observer at {iv}: {statistics.median(c):.2f} % of a core ({min(c):.2f}-{max(c):.2f})"
                      + (f"; without drop reasons {statistics.median(n):.2f} % ({min(n):.2f}-{max(n):.2f})" if n else ""))
            lv = vals(f"observer-{iv}", "tpslab-live", 0, "cpu_pct_of_core")
            if lv:
                print(f"  with --live (160x48, under script's pseudo-terminal): {statistics.median(lv):.2f} % ({min(lv):.2f}-{max(lv):.2f})")
        on_ = lambda m: vals("drop-storm", "tpslab", 64, m)
        off = lambda m: vals("drop-storm", "tpslab-no-reasons", 64, m)
        if on_("sender_pps") and off("sender_pps"):
            a, b = median(on_("sender_pps")), median(off("sender_pps"))
            print("drop storm: kernel-limit sender to a closed port (every datagram a NO_SOCKET drop), tpslab watch beside it")
            print(f"  sender with drop reasons sampled {a:,.0f} pps ({min(on_('sender_pps')):,.0f}-{max(on_('sender_pps')):,.0f}), "
                  f"without {b:,.0f} pps ({min(off('sender_pps')):,.0f}-{max(off('sender_pps')):,.0f}): ratio {a / b:.2f}x")
            c, d = on_("watch_cpu_pct_of_core"), off("watch_cpu_pct_of_core")
            print(f"  watch CPU with reasons {median(c):.1f} % of a core ({min(c):.1f}-{max(c):.1f}), without {median(d):.1f} % ({min(d):.1f}-{max(d):.1f})")
            seen, lost = on_("no_socket_seen_pct_of_sent"), on_("samples_lost")
            print(f"  NO_SOCKET drops counted: {median(seen):.1f} % of what the sender reported sending ({min(seen):.1f}-{max(seen):.1f}); "
                  f"samples lost (rings full): {median(lost):,.0f} ({min(lost):,.0f}-{max(lost):,.0f})")

    if observer_only or pacing_only:
        if pacing_only:
            pacing_report(vals)
        if observer_only:
            print()
            observer()
        return

    def memory():
        m = vals("memory", "tpslab", 1024, "peak_rss_mib")
        if m:
            print(f"peak RSS of a run at --rate max: {m[0]:.1f} MiB")
        for secs in SERIES:
            m = vals("memory-series", "tpslab", secs, "peak_rss_mib")
            k = vals("memory-series", "tpslab", secs, "samples_kept")
            if m:
                print(f"peak RSS, observer at {SERIES_MS} ms for {secs} s ({secs * 1000 // SERIES_MS} samples taken, {k[0]:.0f} kept): {m[0]:.1f} MiB")
                at = [(q, vals("memory-series", "tpslab", secs, f"rss_at_{q}pct_mib")) for q in (25, 50, 75, 100)]
                line = ", ".join(f"{q} %: {v[0]:.1f}" for q, v in at if v)
                if line:
                    print(f"  resident memory over that run (MiB, at % of its length): {line}")

    if memory_only:
        print()
        memory()
        return

    print("\none-way, 1 sender thread (pps; median (min-max)); ratio = tpslab / peer, sent: mean of the")
    print("  per-round ratios [95 % interval]")
    print(f"{'size':>5} {'tool':<13} {'sent pps':>28} {'received pps':>28} {'tpslab/peer':>22}")
    for size in (64, 1024):
        t = byr("one-way", "tpslab", size, "sent_pps")
        for tool in ("tpslab", "kernel-limit", "iperf3", "sockperf"):
            s = vals("one-way", tool, size, "sent_pps")
            ratio = "" if tool == "tpslab" else fmt_ci(ratio_ci(t, byr("one-way", tool, size, "sent_pps")))
            print(f"{size:>5} {tool:<13} {summary(s):>28} {summary(vals('one-way', tool, size, 'recv_pps')):>28} {ratio:>22}")
    print("\nGSO: tpslab load --gso into tpslab serve --gro (sink), datagrams delivered per second")
    for size in (64, 1024):
        d = vals("one-way", "tpslab-gso", size, "recv_pps")
        loss = vals("one-way", "tpslab-gso", size, "loss_pct")
        i3 = median(vals("one-way", "iperf3", size, "sent_pps"))
        print(f"{size:>5} delivered {summary(d):>32}  loss {max(loss):.2f} % (worst)  = {median(d) / i3:.1f}x iperf3 sent")
    if oneway_only:
        return
    server_report(vals, byr)
    print("\nping-pong at 10 k msg/s, 64 B, RTT us (from the actual send to the receiving thread; tpslab-kernel: to the")
    print("  kernel's receive timestamp, without the generator's own wake-up)")
    for tool in ("tpslab", "sockperf"):
        p50 = vals("ping-pong", tool, 64, "p50_us")
        p99 = vals("ping-pong", tool, 64, "p99_us")
        print(f"  {tool:<9} p50 {statistics.median(p50):7.1f} ({min(p50):.1f}-{max(p50):.1f})  "
              f"p99 {statistics.median(p99):7.1f} ({min(p99):.1f}-{max(p99):.1f})")
    k50, k99 = vals("ping-pong", "tpslab", 64, "kernel_p50_us"), vals("ping-pong", "tpslab", 64, "kernel_p99_us")
    if k50:
        print(f"  {'tpslab-kernel':<9} p50 {statistics.median(k50):7.1f} ({min(k50):.1f}-{max(k50):.1f})  "
              f"p99 {statistics.median(k99):7.1f} ({min(k99):.1f}-{max(k99):.1f})")
    t50 = median(vals("ping-pong", "tpslab", 64, "p50_us"))
    s50 = median(vals("ping-pong", "sockperf", 64, "p50_us"))
    print(f"  p50 tpslab / sockperf = {t50 / s50:.2f}")
    print("\nrequest/response: DNS A queries to one local unbound (1 thread, CPU 1); QPS answered, loss %")
    print("  (max: dnsperf keeps 100 queries outstanding; tpslab open loop --rate max; tpslab-closed = ramp udp, 100 users)")
    for rate in (50000, 140000, None):
        test = f"dns-rr-{rate or 'max'}"
        tools = ("tpslab", "dnsperf") + (("tpslab-closed",) if rate is None else ())
        for tool in tools:
            q = vals(test, tool, 0, "qps")
            if not q:
                continue
            l = vals(test, tool, 0, "loss_pct")
            print(f"  {('%d qps' % rate) if rate else 'max':>10} {tool:<14} QPS {summary(q):>32}  loss {median(l):6.3f} % "
                  f"({min(l):.3f}-{max(l):.3f})")
        ci = ratio_ci(byr(test, "tpslab", 0, "qps"), byr(test, "dnsperf", 0, "qps"))
        lt, ld = median(vals(test, "tpslab", 0, "loss_pct")), median(vals(test, "dnsperf", 0, "loss_pct"))
        print(f"  {'':>10} tpslab / dnsperf QPS = {fmt_ci(ci)}; loss difference {lt - ld:+.3f} pp")
    closed_loop_report(vals, byr)
    pacing_report(vals)
    observer()
    memory()


def server_report(vals, byr):
    print("\nreference server receive (kernel-limit sender at full speed into each receiver, recvmmsg 64, same buffer):")
    print("  received pps and delivered %; capacity = datagrams read per CPU second of the receiver (all its threads)")
    for size in (64, 1024):
        for tool, label in (("tpslab", "tpslab serve"), ("kernel-limit", "kernel-limit")):
            d = vals("server-recv", tool, size, "delivered_pct")
            c = vals("server-recv", tool, size, "per_cpu_second")
            ns_ = vals("server-recv", tool, size, "cpu_ns_per_datagram")
            print(f"{size:>5} {label:<13} {summary(vals('server-recv', tool, size, 'recv_pps')):>28}  delivered {median(d):6.2f} %"
                  + (f"  capacity {summary(c):>30}  ({median(ns_):.0f} ns CPU per datagram)" if c else ""))
        r = ratio_ci(byr("server-recv", "tpslab", size, "recv_pps"), byr("server-recv", "kernel-limit", size, "recv_pps"))
        k = ratio_ci(byr("server-recv", "tpslab", size, "per_cpu_second"), byr("server-recv", "kernel-limit", size, "per_cpu_second"))
        print(f"{'':>5} tpslab / kernel-limit: received {fmt_ci(r)}, capacity {fmt_ci(k)}")


def closed_loop_report(vals, byr):
    print("\nclosed loop (QPS median (min-max); ratio = tpslab / peer: mean of the per-round ratios [95 % interval])")
    d = byr("dns-rr-max", "dnsperf", 0, "qps")
    if d:
        c = byr("dns-rr-max", "tpslab-closed", 0, "qps")
        print(f"  DNS on one unbound: ramp udp 100 users {summary(list(c.values()))}, dnsperf 100 outstanding "
              f"{summary(list(d.values()))}: {fmt_ci(ratio_ci(c, d))}")
    if vals("redis-ping", "redis-benchmark", 1, "qps"):
        print("  inline PING on one redis-server: ramp tcp --load-threads 1 vs redis-benchmark -t ping_inline (1 thread)")
        print(f"  {'clients':>7} {'tpslab QPS':>28} {'redis-benchmark QPS':>28} {'QPS ratio':>22}   p50 ms tpslab / peer   p99 ms tpslab / peer")
        for c in (1, 50, 1000):
            t, r = byr("redis-ping", "tpslab-closed", c, "qps"), byr("redis-ping", "redis-benchmark", c, "qps")
            p50 = lambda tool: median(vals("redis-ping", tool, c, "p50_ms"))
            p99 = lambda tool: median(vals("redis-ping", tool, c, "p99_ms"))
            e = vals("redis-ping", "tpslab-closed", c, "errors")
            print(f"  {c:>7} {summary(list(t.values())):>28} {summary(list(r.values())):>28} {fmt_ci(ratio_ci(t, r)):>22}   "
                  f"{p50('tpslab-closed'):.3f} / {p50('redis-benchmark'):.3f}          {p99('tpslab-closed'):.3f} / {p99('redis-benchmark'):.3f}"
                  + (f"   tpslab errors {max(e):.0f}" if e and max(e) else ""))
    k = lambda m: vals("ramp-10k", "tpslab-closed", 10000, m)
    if k("tps"):
        print(f"  one step of 10,000 TCP users, tpslab's echo server: {k('tps')[0]:,.0f} TPS, p50 {k('p50_ms')[0]:.1f} ms, "
              f"p99 {k('p99_ms')[0]:.1f} ms, errors {k('errors')[0]:.0f}, generator peak RSS {k('peak_rss_mib')[0]:.1f} MiB, "
              f"{k('wall_s')[0]:.1f} s wall")


def pacing_report(vals):
    print("\npacing: tpslab load --rate R --no-replies into a sink (median (min-max)); slack = --pacing-slack")
    for rate in (100000, 10000):
        for tool, slack in (("tpslab", "0 (exact)"), ("tpslab-slack-1ms", "1ms"), ("tpslab-slack-auto", "auto")):
            e = vals("pacing", tool, rate, "rate_error_pct")
            lag = vals("pacing", tool, rate, "lag_p99_us")
            c = vals("pacing", tool, rate, "cpu_pct_of_core")
            f = vals("pacing", tool, rate, "sleep_floor_cpu_pct")
            used = vals("pacing", tool, rate, "slack_us")
            if tool == "tpslab-slack-auto" and used:
                slack = f"auto={median(used):.0f}us"
            if e:
                print(f"  {rate:>7} pps, slack {slack:<9}: rate error {median(e):+.3f} %  lag p99 {median(lag):.1f} us ({min(lag):.1f}-{max(lag):.1f})  "
                      f"CPU {median(c):.1f} % of a core ({min(c):.1f}-{max(c):.1f}); a bare sleep per datagram costs {median(f):.1f} %")


def save(rows):
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    path = os.path.join(ROOT, "bench", "results", "results.csv")
    cpu = ""
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    machine = f"{platform.node()} {platform.release()} {os.cpu_count()} CPUs {cpu}"
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
        w = csv.writer(f)
        if new:
            w.writerow(["time", "machine", "test", "tool", "size", "metric", "value", "round"])
        for r in rows:
            w.writerow([stamp, machine, *r])
    print(f"\nraw results appended to {path}")


if __name__ == "__main__":
    main()
