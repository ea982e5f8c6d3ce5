#!/usr/bin/env python3
"""Re-run the guide's examples and rewrite their blocks.

A block is marked in README.md, docs/**/*.md or bench/README.md as

    <!-- regen: COMMAND -->
    ```
    what COMMAND printed
    ```
    <!-- /regen -->

COMMAND is run by `sh -c` from the repository's root, with the built binary's folder
($TPSLAB_BIN's, else the newer of target/suite, ./test.sh's build, and target/release)
first on PATH, so `tpslab` is the build
under test; what it prints on standard output becomes the block (a command that wants
its stderr says `2>&1`). These are deterministic (fixtures, `bdp`, usage errors):
tests/suite/docs.rs checks on every `cargo test` that they are what the binary prints.

Runs that need root, a lab (network namespaces, loopback servers) and seconds to minutes
are marked `<!-- regen lab: SCRIPT [| FILTER] -->`, SCRIPT being `sh docs/transcripts/
NAME.sh [ARGS]`, right after a `<!-- ran: ...; DATE UTC; ... -->` line that says when the
block was made. `--lab` runs them too (as root; each SCRIPT once, however many blocks
filter its output; at most LAB_TIMEOUT seconds each), rewrites the block and its `ran:`
line. A script is given $REC: the path of a record to write (`--json "$REC"`) when its
output is that record's terminal report; the record is then kept, gzipped, as
docs/transcripts/NAME.json.gz (NAME_ARGS.json.gz: see record_name), and tests/suite/docs.rs
checks on every `cargo test` (without root, in a second) that `tpslab report` of it,
through FILTER, is the block: what the code prints now for that run. `--records` rewrites those blocks from the kept records (after a
change to a report's text; no root, no run).

`--check` rewrites nothing and exits 1 naming every block that differs. Lab blocks are
compared by their shape, not their figures: numbers (with their unit) are one token,
runs of blanks and of table rules one blank, and a repeated line (a table's rows) one
line; a block whose shape differs prints the code's new lines or labels.

    python3 docs/regen.py                  # deterministic blocks
    python3 docs/regen.py --check          # the same, checking
    sudo python3 docs/regen.py --lab       # and the lab runs (about 8 minutes here: 34 runs)
    sudo python3 docs/regen.py --lab --check
    python3 docs/regen.py --records        # lab blocks from their kept records
    python3 docs/regen.py --lab --only s5  # only lab scripts whose name contains s5
"""
import datetime
import gzip
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
TRANSCRIPTS = ROOT / "docs" / "transcripts"
LAB_TIMEOUT = 240
BLOCK = re.compile(
    r"^(?P<ran><!-- ran: [^\n]*-->\n)?(?P<head><!-- regen(?P<lab> lab)?: (?P<cmd>[^\n]*?) -->\n)"
    r"(?P<body>(?:```\n.*?```\n)?)(?P<tail><!-- /regen -->)",
    re.S | re.M,
)
SCRIPT = re.compile(r"^sh (docs/transcripts/(?P<name>[\w.-]+)\.sh)(?P<args>[^|]*?)\s*(?:\|\s*(?P<filter>.*))?$")


def pages():
    yield ROOT / "README.md"
    yield ROOT / "bench" / "README.md"
    yield from sorted((ROOT / "docs").rglob("*.md"))


def binary():
    """$TPSLAB_BIN, else the newer of ./test.sh's build and a release build; exits when
    there is none (an installed tpslab of another version must not write the blocks)."""
    if os.environ.get("TPSLAB_BIN"):
        return os.environ["TPSLAB_BIN"]
    built = [p for p in (ROOT / "target" / "suite" / "tpslab", ROOT / "target" / "release" / "tpslab")
             if p.is_file()]
    if not built:
        sys.exit("regen.py: no target/suite/tpslab or target/release/tpslab: run ./test.sh "
                 "or cargo build --release first, or set TPSLAB_BIN")
    return str(max(built, key=lambda p: p.stat().st_mtime))


def environment():
    env = dict(os.environ)
    env["PATH"] = str(pathlib.Path(binary()).parent) + os.pathsep + env.get("PATH", "")
    return env


def fenced(out):
    if out and not out.endswith("\n"):
        out += "\n"
    return "```\n" + out + "```\n"


def run(cmd, stdin=None, timeout=None, env=None):
    return subprocess.run(
        ["sh", "-c", cmd],
        cwd=ROOT,
        env=env or environment(),
        input=stdin,
        stdout=subprocess.PIPE,
        check=False,
        timeout=timeout,
    ).stdout


NUMBER = re.compile(
    r"[+-]?\d[\d.,:]*(?:\s?(?:ns|us|µs|ms|s|min|h|d|B|KiB|MiB|GiB|kB|MB|Mbit/s|Gbit/s|pps|%))?(?![\w])"
)
RULES = re.compile(r"[─═━]+")


def shape(block):
    """The lines a block's code prints, without its figures (see the module's doc)."""
    out = []
    for line in block.splitlines():
        s = NUMBER.sub("#", line)
        s = RULES.sub("-", s)
        s = re.sub(r"#(?:[\s,/x()\[\]-]*#)+", "#", s)
        s = re.sub(r"\s+", " ", s).strip()
        if not out or out[-1] != s:
            out.append(s)
    return out


class Lab:
    """Runs each lab script once and keeps what it printed."""

    def __init__(self, keep_records):
        self.out = {}
        self.keep = keep_records
        self.tmp = pathlib.Path(tempfile.mkdtemp(prefix="tpslab-regen-"))
        self.took = {}

    def printed(self, name, script, kept):
        if script not in self.out:
            rec = self.tmp / f"{len(self.out)}.json"
            env = environment()
            env["REC"] = str(rec)
            t0 = time.monotonic()
            print(f"lab: {script} ...", file=sys.stderr, flush=True)
            try:
                out = run(script, timeout=LAB_TIMEOUT, env=env)
            except subprocess.TimeoutExpired:
                print(f"lab: {script}: more than {LAB_TIMEOUT} s, left out", file=sys.stderr)
                out = None
            self.took[script] = time.monotonic() - t0
            print(f"lab: {script}: {self.took[script]:.1f} s", file=sys.stderr, flush=True)
            if out is not None and self.keep and rec.exists():
                with open(rec, "rb") as f, open(TRANSCRIPTS / kept, "wb") as z, gzip.GzipFile(
                    fileobj=z, mode="wb", compresslevel=9, mtime=0
                ) as g:
                    shutil.copyfileobj(f, g)
            self.out[script] = out
        return self.out[script]


def record_name(name, args):
    """The kept record of `sh docs/transcripts/NAME.sh ARGS`: NAME.json.gz, or with ARGS
    NAME_ARGS.json.gz, ARGS' runs of other than letters and digits as one `-`."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", args).strip("-")
    return f"{name}_{slug}.json.gz" if slug else f"{name}.json.gz"


def commit():
    sha = run("git rev-parse --short HEAD 2>/dev/null").decode().strip() or "unknown"
    # The code only: the pages themselves change as they are rewritten.
    dirty = run("git status --porcelain -- src crates Cargo.toml Cargo.lock 2>/dev/null").strip()
    return sha + (" plus uncommitted changes" if dirty else "")


def ran_line():
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load = os.getloadavg()[0]
    return (
        f"<!-- ran: docs/regen.py --lab; {now}; tpslab built from commit {commit()}; "
        f"this machine (load average {load:.1f}) -->\n"
    )


def main():
    args = sys.argv[1:]
    check = "--check" in args
    lab_mode = "--lab" in args
    records = "--records" in args
    only = args[args.index("--only") + 1] if "--only" in args else None
    if lab_mode and os.geteuid() != 0:
        print("regen.py --lab: the lab runs need root", file=sys.stderr)
        return 2
    lab = Lab(keep_records=not check)
    stale = []
    t0 = time.monotonic()
    for page in pages():
        if not page.exists():
            continue
        text = page.read_text()

        def fill(m):
            cmd = m.group("cmd")
            where = f"{page.relative_to(ROOT)}: {cmd}"
            keep = m.group(0)
            if not m.group("lab"):
                if records or only:
                    return keep
                body = fenced(run(cmd).decode())
                if body != m.group("body"):
                    stale.append(where)
                return (m.group("ran") or "") + m.group("head") + body + m.group("tail")
            s = SCRIPT.match(cmd)
            if not s or not m.group("ran"):
                stale.append(f"{where}: a lab block is `sh docs/transcripts/NAME.sh [| FILTER]` after a ran: line")
                return keep
            if only and only not in s.group("name"):
                return keep
            script = f"sh {s.group(1)}{s.group('args')}".rstrip()
            filt = s.group("filter")
            if records:
                rec = TRANSCRIPTS / record_name(s.group("name"), s.group("args"))
                if not rec.exists():
                    return keep
                with tempfile.NamedTemporaryFile(suffix=".json") as f:
                    f.write(gzip.decompress(rec.read_bytes()))
                    f.flush()
                    out = run(f"tpslab report {f.name}")
                if filt:
                    out = run(filt, stdin=out)
                body = fenced(out.decode())
                if body != m.group("body"):
                    stale.append(where)
                return m.group("ran") + m.group("head") + body + m.group("tail")
            if not lab_mode:
                return keep
            out = lab.printed(s.group("name"), script, record_name(s.group("name"), s.group("args")))
            if out is None:
                stale.append(f"{where}: timed out")
                return keep
            if filt:
                out = run(filt, stdin=out)
            body = fenced(out.decode())
            if check:
                was, now = shape(m.group("body")), shape(body)
                if was != now:
                    new = [l for l in now if l not in was]
                    gone = [l for l in was if l not in now]
                    if new or gone:
                        why = (
                            f"\n  printed now, not in the page: {new}\n"
                            f"  in the page, not printed now: {gone}"
                        )
                    else:
                        why = ": the same lines, in another order or number"
                    stale.append(f"{where}: shape differs{why}")
                return keep
            if body.strip("`\n") == "":
                stale.append(f"{where}: printed nothing (page kept)")
                return keep
            stale.append(where)
            return ran_line() + m.group("head") + body + m.group("tail")

        new = BLOCK.sub(fill, text)
        if not check and new != text:
            page.write_text(new)
    for s in stale:
        print(("differs: " if check else "rewritten: ") + s)
    if lab.took:
        print(f"lab: {len(lab.took)} script(s) in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    shutil.rmtree(lab.tmp, ignore_errors=True)
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
