#!/usr/bin/env python3
"""Re-run the guide's deterministic examples and rewrite their blocks.

A block is marked in README.md, docs/**/*.md or bench/README.md as

    <!-- regen: COMMAND -->
    ```
    what COMMAND printed
    ```
    <!-- /regen -->

COMMAND is run by `sh -c` from the repository's root, with the built binary's folder
(target/release, or the folder of $TPSLAB_BIN) first on PATH, so `tpslab` is the build
under test; what it prints on standard output becomes the block (a command that wants
its stderr says `2>&1`). `--check` rewrites nothing and exits 1 naming every block that
differs. tests/docs.rs makes the same check on every `cargo test`.

Blocks of runs that need root and a lab are not regenerated: they carry a
`<!-- ran: COMMAND; DATE; ... -->` line instead.
"""
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
BLOCK = re.compile(
    r"^(<!-- regen: (?P<cmd>[^\n]*?) -->\n)(?P<body>(?:```\n.*?```\n)?)(<!-- /regen -->)",
    re.S | re.M,
)


def pages():
    yield ROOT / "README.md"
    yield ROOT / "bench" / "README.md"
    yield from sorted((ROOT / "docs").rglob("*.md"))


def run(cmd):
    binary = os.environ.get("TPSLAB_BIN", str(ROOT / "target" / "release" / "tpslab"))
    env = dict(os.environ)
    env["PATH"] = str(pathlib.Path(binary).parent) + os.pathsep + env.get("PATH", "")
    out = subprocess.run(
        ["sh", "-c", cmd], cwd=ROOT, env=env, stdout=subprocess.PIPE, check=False
    ).stdout.decode()
    if out and not out.endswith("\n"):
        out += "\n"
    return "```\n" + out + "```\n"


def main():
    check = "--check" in sys.argv[1:]
    stale = []
    for page in pages():
        if not page.exists():
            continue
        text = page.read_text()

        def fill(m):
            body = run(m.group("cmd"))
            if body != m.group("body"):
                stale.append(f"{page.relative_to(ROOT)}: {m.group('cmd')}")
            return m.group(1) + body + m.group(4)

        new = BLOCK.sub(fill, text)
        if not check and new != text:
            page.write_text(new)
    for s in stale:
        print(("differs: " if check else "rewritten: ") + s)
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
