#!/usr/bin/env python3
"""tpslab before/after: a given commit's generator beside the working tree's (or a second
commit's), measured in the same run, round by round, with the kernel-limit sender as the
yardstick. Run it whenever a change touches the load, the observer or the event loops.

Run as root from the repository:
    python3 bench/before_after.py BASE [--after COMMIT] [--rounds 5] [--seconds 3]
                                       [--sizes 64,1024] [--no-http] [--http-users 50]

BASE (and `--after`, else the working tree) is built with `cargo build --release --bin
tpslab` from `git archive` of the commit into target/before-after/src, in a target folder of
its own (target/before-after/target, shared by every commit built here, so the next build
is incremental); the binary is kept as target/before-after/tpslab-SHA12 and reused.

One-way (as bench/run.py measures it): `load udp --rate max --no-replies --size N`, one
sender thread, every tpslab thread pinned to CPU 0, into the kernel-limit receiver
(`udprecv -m recvmmsg -b 64`, CPU 1) in a private network namespace, beside the
kernel-limit sender (`udpsend -m sendmmsg -b 64`, CPU 0); the three alternate, the order
rotated each round. HTTP/1.1 closed loop (as bench/http1.py measures it): one `ramp http`
step of `--http-users` keep-alive users against nginx (one worker, CPU 1), before and after
alternating. Prints each figure as median (min-max) and the ratios after/before,
after/kernel-limit and before/kernel-limit as the mean of the per-round ratios with a 95 %
t interval (an interval that contains 1.00: this run cannot tell the two apart).
"""

import argparse
import os
import platform
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the one-way measurement and the kernel-limit programs)

ROOT = run.ROOT
BA = os.path.join(ROOT, "target", "before-after")


def git(*args):
    return subprocess.run(["git", *args], cwd=ROOT, check=True, text=True, capture_output=True).stdout.strip()


def build_commit(rev):
    """The release binary of commit `rev`, built once (cached by SHA): its path and SHA12."""
    sha = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    out = os.path.join(BA, f"tpslab-{sha[:12]}")
    if os.path.exists(out):
        return out, sha[:12]
    src = os.path.join(BA, "src")
    shutil.rmtree(src, ignore_errors=True)
    os.makedirs(src)
    archive = subprocess.Popen(["git", "archive", sha], cwd=ROOT, stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", src], stdin=archive.stdout, check=True)
    if archive.wait() != 0:
        sys.exit(f"before_after.py: git archive {sha} failed")
    t0 = time.time()
    print(f"building {sha[:12]} ({git('log', '-1', '--format=%s', sha)[:70]}) ...", flush=True)
    env = {**os.environ, "CARGO_TARGET_DIR": os.path.join(BA, "target")}
    subprocess.run(["cargo", "build", "--release", "-q", "--bin", "tpslab"], cwd=src, env=env, check=True)
    shutil.copy2(os.path.join(BA, "target", "release", "tpslab"), out)
    print(f"built {sha[:12]} in {time.time() - t0:.0f} s", flush=True)
    return out, sha[:12]


def build_tree():
    t0 = time.time()
    subprocess.run(["cargo", "build", "--release", "-q", "--bin", "tpslab"], cwd=ROOT, check=True)
    dirty = " (with uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no") else ""
    print(f"built the working tree ({git('rev-parse', '--short=12', 'HEAD')}{dirty}) in {time.time() - t0:.0f} s",
          flush=True)
    out = os.path.join(BA, "tpslab-worktree")
    shutil.copy2(os.path.join(ROOT, "target", "release", "tpslab"), out)
    return out, f"worktree {git('rev-parse', '--short=12', 'HEAD')}{dirty}"


def host():
    """One line: time, host, CPUs and their model, kernel."""
    cpu = "?"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return (f"ran: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {platform.node()}, "
            f"{os.cpu_count()} x {cpu}, Linux {platform.release()}")


def setup_oneway():
    if os.geteuid() != 0:
        sys.exit("before_after.py: needs root (network namespace, CPU pinning)")
    for prog, extra in (("udpsend", ["-pthread"]), ("udprecv", [])):
        run.sh(["gcc", "-O2", *extra, "-o", os.path.join(run.OUT, prog), os.path.join(run.LIMITS, prog + ".c")])
    run.sh(["ip", "netns", "add", run.NS])
    run.sh(["ip", "-n", run.NS, "link", "set", "lo", "up"])


def oneway(tool, binary, size, secs, port):
    if tool == "kernel-limit":
        return run.udpsend_oneway(size, secs, port)["recv_pps"]
    run.TPSLAB = binary
    return run.tpslab_oneway(size, secs, port)["recv_pps"]


def http_rounds(a, bins):
    import http1
    port = http1.free_port()
    ng = http1.nginx(port, a.http_users)
    url = f"http://127.0.0.1:{port}/index.html"
    got = {name: {} for name in bins}
    try:
        for rnd in range(a.rounds):
            order = list(bins) if rnd % 2 == 0 else list(reversed(list(bins)))
            for name in order:
                http1.TPSLAB = bins[name][0]
                got[name][rnd] = http1.tpslab(url, a.http_users, a.seconds)["rps"]
            print(f"round {rnd + 1} HTTP/1.1 {a.http_users} users: " +
                  ", ".join(f"{n} {got[n][rnd]:,.0f}/s" for n in order), flush=True)
    finally:
        ng.terminate()
        ng.wait(10)
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("base", help="the commit measured as 'before'")
    ap.add_argument("--after", help="a commit measured as 'after' (default: the working tree)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--sizes", default="64,1024", help="one-way datagram sizes, bytes (comma-separated)")
    ap.add_argument("--no-http", action="store_true", help="leave out the HTTP/1.1 closed loop")
    ap.add_argument("--http-users", type=int, default=50)
    a = ap.parse_args()
    if a.rounds < 2:
        sys.exit("before_after.py: --rounds must be at least 2 (an interval needs two rounds)")
    sizes = [int(s) for s in a.sizes.split(",") if s]
    os.makedirs(BA, exist_ok=True)
    before = build_commit(a.base)
    after = build_commit(a.after) if a.after else build_tree()
    bins = {"before": before, "after": after}
    print(f"before: {before[1]}  after: {after[1]}")
    print(host())
    setup_oneway()
    pps = {(t, s): {} for t in ("before", "after", "kernel-limit") for s in sizes}
    port = 21000
    try:
        for rnd in range(a.rounds):
            for size in sizes:
                tools = ["before", "after", "kernel-limit"]
                tools = tools[rnd % 3:] + tools[: rnd % 3]
                for t in tools:
                    port += 1
                    pps[(t, size)][rnd] = oneway(t, bins.get(t, (None,))[0], size, a.seconds, port)
                print(f"round {rnd + 1} {size:>4} B ({' < '.join(tools)}): " +
                      ", ".join(f"{t} {pps[(t, size)][rnd]:,.0f}" for t in tools), flush=True)
    finally:
        run.teardown()
    http = None if a.no_http else http_rounds(a, bins)
    print()
    print(f"one-way, 1 sender thread on CPU 0 into udprecv recvmmsg 64 on CPU 1; received pps, "
          f"median (min-max) of {a.rounds} rounds of {a.seconds} s; ratios: mean of the per-round "
          f"ratios [95 % interval]")
    print(f"before = {before[1]}, after = {after[1]}; {host()}")
    for size in sizes:
        for t in ("before", "after", "kernel-limit"):
            print(f"{size:>5} B {t:<13} {run.summary(list(pps[(t, size)].values())):>32}")
        r = lambda x, y: run.fmt_ci(run.ratio_ci(pps[(x, size)], pps[(y, size)]))  # noqa: E731
        print(f"{size:>5} B after/before {r('after', 'before')}   after/kernel-limit {r('after', 'kernel-limit')}"
              f"   before/kernel-limit {r('before', 'kernel-limit')}")
    if http:
        print(f"HTTP/1.1 closed loop, {a.http_users} keep-alive users, nginx 1 worker: requests/s")
        for t in ("before", "after"):
            print(f"        {t:<13} {run.summary(list(http[t].values())):>32}")
        print(f"        after/before {run.fmt_ci(run.ratio_ci(http['after'], http['before']))}")


if __name__ == "__main__":
    main()
