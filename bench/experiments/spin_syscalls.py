"""Experiment (issue 57): system calls and context switches a request, tpslab and nginx,
under `perf stat` (syscall tracepoints), HTTP/2 one connection x 100 streams, tpslab
built with spin-before-wait.patch, its poll off (TPSLAB_SPIN_NS unset) and on
(TPSLAB_SPIN_NS=1000000) in alternation. Run from the repository:  python3 bench/experiments/spin_syscalls.py [PAIRS]
"""
import os, sys, subprocess, json, re, tempfile
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import http_max as H
from common import free_port, raise_nofile, on
raise_nofile(4096)
T = tempfile.mkdtemp(prefix="tpslab-spin-")
h1, h2 = free_port(), free_port()
ng = H.nginx(h1, h2)
url = f"http://127.0.0.1:{h2}/index.html"
EV = "syscalls:sys_enter_sendto,syscalls:sys_enter_recvfrom,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_writev,syscalls:sys_enter_read,syscalls:sys_enter_write,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_readv"
def run(spin, n):
    env = dict(os.environ)
    if spin: env["TPSLAB_SPIN_NS"] = spin
    js = os.path.join(T, "t.json")
    ngp = subprocess.Popen(["perf", "stat", "-x,", "-e", EV + ",context-switches", "-p", str(ng.pid), "-o", os.path.join(T, "ng.txt")])
    cmd = ["perf", "stat", "-x,", "-e", EV + ",context-switches", "-o", os.path.join(T, "tp.txt"), H.TPSLAB, "load", "http", url, "--rate", "max", "--connections", "1", "--load-threads", "1", "--duration", "3s", "--timeout", "2s", "--no-history", "-q", "--json", js, "--http2", "--streams", "100"]
    subprocess.run(on(0, *cmd), env=env, check=True)
    ngp.send_signal(2); ngp.wait()
    r = json.load(open(js))["result"]
    ok = r["status"]["s2xx"]
    def parse(f):
        d = {}
        for l in open(f):
            p = l.strip().split(",")
            if len(p) > 3 and p[0].replace(".", "").isdigit():
                d[p[2].split(":")[-1].replace("sys_enter_", "")] = float(p[0])
        return d
    t, g = parse(os.path.join(T, "tp.txt")), parse(os.path.join(T, "ng.txt"))
    print(f"spin={spin} {ok/3:,.0f}/s  tpslab/req " + " ".join(f"{k}={v/ok:.2f}" for k, v in t.items() if v) + " | nginx/req " + " ".join(f"{k}={v/ok:.2f}" for k, v in g.items() if v), flush=True)
try:
    for i in range(int(sys.argv[1])):
        run(None, i); run("1000000", i)
finally:
    ng.terminate(); ng.wait(10)
