#!/usr/bin/env python3
"""Peak RSS of reading a big record back (issue 53).

Writes a valid `tcp --lab` record of about --mb megabytes (the fixture
crates/tpslab-report/tests/fixtures/tcp_lab.json with each of its 2 flows' TCP_INFO
samples repeated at later times, up to the 360 002 samples a flow may hold), then runs
`tpslab report FILE` (with --all also `report --format json FILE` and `compare FILE FILE`)
under /usr/bin/time -v and prints the record's size, the peak RSS and their ratio.

    python3 bench/record_memory.py [--mb 200] [--bin target/release/tpslab] [--keep]

The record is written in pieces (never held whole here), into a temporary folder removed
at the end unless --keep.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "crates/tpslab-report/tests/fixtures/tcp_lab.json")
FLOW_SAMPLES = 360_002


def write_record(path, mb):
    rec = json.load(open(FIXTURE))
    runs = rec["runs"]
    bases = []
    for i, run in enumerate(runs):
        bases.append(run["flow"]["samples"])
        run["flow"]["samples"] = f"@@SAMPLES{i}@@"
    one = len(json.dumps(bases[0][0], separators=(",", ":"))) + 1
    per_flow = min(FLOW_SAMPLES, int(mb * 1e6 / one / len(runs)))
    text = json.dumps(rec, separators=(",", ":"))
    with open(path, "w") as out:
        rest = text
        for i, base in enumerate(bases):
            head, rest = rest.split(f'"@@SAMPLES{i}@@"', 1)
            out.write(head)
            out.write("[")
            step = base[-1]["t_ns"] + 1
            for k in range(per_flow):
                s = dict(base[k % len(base)])
                s["t_ns"] += (k // len(base)) * step
                if k:
                    out.write(",")
                out.write(json.dumps(s, separators=(",", ":")))
            out.write("]")
        out.write(rest)
    return per_flow


def peak_rss_kib(argv):
    r = subprocess.run(
        ["/usr/bin/time", "-v"] + argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr)
    wall = re.search(r"Elapsed \(wall clock\) time.*: (\S+)", r.stderr)
    if r.returncode != 0 or not m:
        sys.exit(f"{' '.join(argv)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    return int(m.group(1)), wall.group(1) if wall else "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=200)
    ap.add_argument("--bin", default=os.environ.get("TPSLAB_BIN", os.path.join(ROOT, "target/release/tpslab")))
    ap.add_argument("--all", action="store_true", help="also compare and report --format json")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="tpslab-record-memory-")
    path = os.path.join(tmp, "big_tcp.json")
    try:
        n = write_record(path, a.mb)
        size = os.path.getsize(path)
        print(f"record: {path}: {size / 1e6:.1f} MB, 2 flows of {n} TCP_INFO samples")
        cmds = [["report", path]]
        if a.all:
            cmds += [["report", "--format", "json", path], ["compare", path, path]]
        for c in cmds:
            kib, wall = peak_rss_kib([a.bin] + c)
            print(
                f"tpslab {' '.join(c).replace(path, 'FILE')}: peak RSS {kib / 1024:.0f} MiB"
                f" ({kib * 1024 / size:.2f}x the record), {wall} wall"
            )
    finally:
        if a.keep:
            print(f"kept {path}")
        else:
            os.remove(path)
            os.rmdir(tmp)


if __name__ == "__main__":
    main()
