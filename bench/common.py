"""Helpers the benchmarks share (http_max.py, http1.py, http2.py, http3.py, resp.py):
bounded subprocess runs, CPU pinning, a free port, RLIMIT_NOFILE, a process's CPU ticks,
duration text of wrk and h2load, medians and the paired ratio with its 95 % t interval,
and one line naming the host, the commit and the tools."""

import os
import platform
import re
import resource
import socket
import statistics
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sh(cmd, timeout=600, **kw):
    """Runs a command to completion (bounded by `timeout` s); raises on a non-zero exit."""
    return subprocess.run(cmd, check=True, text=True, capture_output=True, timeout=timeout, **kw)


def on(cpu, *cmd):
    """`cmd` pinned to CPU `cpu` (taskset)."""
    return ["taskset", "-c", str(cpu), *cmd]


def free_port():
    """A TCP port of 127.0.0.1 free a moment ago."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def raise_nofile(want):
    """Soft RLIMIT_NOFILE up to `want` descriptors (children inherit it): the hard limit is
    raised too where allowed (root), else the soft one goes up to the hard one. Returns the
    new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= want:
        return soft
    for lim in ((want, max(hard, want)), (min(want, hard), hard)):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, lim)
            return lim[0]
        except (ValueError, OSError):
            pass
    return soft


def wait_listening(port, proc, what, seconds=10):
    """Waits until 127.0.0.1:`port` accepts a TCP connection; exits naming `what` when
    `proc` ended or `seconds` passed first."""
    deadline = time.time() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                raise SystemExit(f"{what} did not start listening on port {port}")
            time.sleep(0.05)


def cpu_ticks(pid):
    """utime + stime of process `pid`, clock ticks (/proc/PID/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return int(rest[11]) + int(rest[12])


def duration_ms(v):
    """A duration as wrk and h2load print it (128.00us, 1.23ms, 2.00s) in ms."""
    for unit, f in (("us", 1e-3), ("ms", 1.0), ("s", 1e3)):
        if v.endswith(unit):
            return float(v[: -len(unit)]) * f
    return float(v)


# Two-sided 95 % Student t quantiles by degrees of freedom (1..30; above: the normal's).
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def ratio_ci(pairs):
    """Mean of the per-round ratios a/b with a 95 % t interval: 'm x [lo, hi]'."""
    rs = [a / b for a, b in pairs if b]
    if not rs:
        return "-"
    m = statistics.mean(rs)
    if len(rs) < 2:
        return f"{m:.2f}x"
    t = T975[len(rs) - 2] if len(rs) - 1 <= len(T975) else 1.96
    h = t * statistics.stdev(rs) / len(rs) ** 0.5
    return f"{m:.2f}x [{m - h:.2f}, {m + h:.2f}]"


def med(xs, fmt="{:,.0f}"):
    """'median (min-max)' of `xs` in `fmt`."""
    return f"{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}-{fmt.format(max(xs))})" if xs else "-"


def version(cmd):
    """The first line a tool prints about its version (stdout or stderr), or '?'."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except OSError:
        return "?"
    lines = (r.stdout + r.stderr).strip().split("\n")
    return lines[0].strip() if lines and lines[0] else "?"


def where(*tools):
    """One line: when, host, CPUs, kernel, commit, and each of `tools` (a version line)."""
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
    return (f"ran: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {platform.node()}, "
            f"{os.cpu_count()} x {cpu}, Linux {platform.release()}, commit {commit}; "
            + "; ".join(tools))
