"""Experiment (issue 57): tpslab with a poll before each sleeping wait, the same binary
with the poll off ("plain": TPSLAB_SPIN_NS unset) and oha, HTTP/2 one connection x 100 streams (or HTTP/1.1 at N connections).

Needs a binary built with bench/experiments/spin-before-wait.patch applied (TPSLAB_BIN or
target/release/tpslab; the poll's length comes from TPSLAB_SPIN_NS) and oha.
Run from the repository:  python3 bench/experiments/spin.py [h2|N] [ROUNDS] [SPIN_NS] [OHA]
"""
import os, sys, statistics
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import http_max as H
from common import ratio_ci, free_port, raise_nofile
raise_nofile(4096)
h1, h2 = free_port(), free_port()
ng = H.nginx(h1, h2)
case = sys.argv[1] if len(sys.argv) > 1 else "h2"
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
spin = sys.argv[3] if len(sys.argv) > 3 else "50000"
OHA = sys.argv[4] if len(sys.argv) > 4 else "oha"
if case == "h2":
    url, conns, streams, http2 = f"http://127.0.0.1:{h2}/index.html", 1, 100, True
else:
    url, conns, streams, http2 = f"http://127.0.0.1:{h1}/index.html", int(case), 1, False
def tp(s):
    def f():
        if s: os.environ["TPSLAB_SPIN_NS"] = s
        else: os.environ.pop("TPSLAB_SPIN_NS", None)
        return H.tpslab(url, conns, streams, http2, 3)
    return f
rows = []
try:
    for r in range(rounds):
        tools = [("plain", tp(None)), ("spin", tp(spin)), ("oha", lambda: H.oha(OHA, url, conns, streams, http2, 3))]
        k = r % 3; tools = tools[k:] + tools[:k]
        got = {n: H.with_cost(ng.pid, f) for n, f in tools}
        rows.append(got)
        print(r, "; ".join(f"{n} {g['rps']:,.0f} nginx {g['nginx_us']:.1f}us mean {g['mean_ms']:.3f}" for n, g in got.items()), flush=True)
finally:
    ng.terminate(); ng.wait(10)
for a, b in (("spin", "plain"), ("spin", "oha"), ("plain", "oha")):
    print(a, "/", b, ratio_ci([(x[a]["rps"], x[b]["rps"]) for x in rows]))
