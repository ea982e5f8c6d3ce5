#!/usr/bin/env python3
"""A `tmux capture-pane -p -e` screen as an HTML page whose every character sits in a cell
of its own, one terminal column wide (CSS `1ch` of the monospace font), so a glyph the
font lacks (braille, drawn from a fallback font with another width) cannot push the rest
of its row: the picture is the terminal's grid. SGR colours (16, 256, true colour), bold,
dim and reverse are kept.

    python3 docs/transcripts/ansi_grid.py SCREEN.ansi OUT.html
    python3 docs/transcripts/ansi_grid.py --cells SCREEN.ansi   # the cells as JSON
"""
import html
import json
import re
import sys

BASE = ["#000000", "#cd3131", "#0dbc79", "#e5e510", "#2472c8", "#bc3fbc", "#11a8cd", "#e5e5e5",
        "#666666", "#f14c4c", "#23d18b", "#f5f543", "#3b8eea", "#d670d6", "#29b8db", "#ffffff"]
FG, BG = "#e5e5e5", "#000000"
SGR = re.compile(r"\x1b\[([0-9;:]*)m")


def c256(n):
    if n < 16:
        return BASE[n]
    if n < 232:
        n -= 16
        v = [0, 95, 135, 175, 215, 255]
        return "#%02x%02x%02x" % (v[n // 36], v[n // 6 % 6], v[n % 6])
    g = 8 + (n - 232) * 10
    return "#%02x%02x%02x" % (g, g, g)


def apply(codes, st):
    ps = [int(p) if p else 0 for p in codes.replace(":", ";").split(";")] or [0]
    i = 0
    while i < len(ps):
        p = ps[i]
        if p == 0:
            st.update(fg=None, bg=None, bold=False, dim=False, rev=False)
        elif p == 1:
            st["bold"] = True
        elif p == 2:
            st["dim"] = True
        elif p == 22:
            st["bold"] = st["dim"] = False
        elif p == 7:
            st["rev"] = True
        elif p == 27:
            st["rev"] = False
        elif 30 <= p <= 37 or 90 <= p <= 97:
            st["fg"] = BASE[p - 30 if p < 90 else p - 82]
        elif 40 <= p <= 47 or 100 <= p <= 107:
            st["bg"] = BASE[p - 40 if p < 100 else p - 92]
        elif p in (39, 49):
            st["fg" if p == 39 else "bg"] = None
        elif p in (38, 48) and i + 1 < len(ps):
            key = "fg" if p == 38 else "bg"
            if ps[i + 1] == 5 and i + 2 < len(ps):
                st[key], i = c256(ps[i + 2]), i + 2
            elif ps[i + 1] == 2 and i + 4 < len(ps):
                st[key], i = "#%02x%02x%02x" % tuple(ps[i + 2:i + 5]), i + 4
        i += 1


def row_cells(line, st):
    """The cells of one captured line: (character, CSS style, fg, bg), the colours as
    drawn (reverse swapped; dim is the page's opacity 0.6, left to the style)."""
    out, pos = [], 0
    for m in list(SGR.finditer(line)) + [None]:
        text = line[pos:m.start() if m else len(line)]
        for ch in text:
            fg, bg = st["fg"] or FG, st["bg"] or BG
            if st["rev"]:
                fg, bg = bg, fg
            style = f"color:{fg};background:{bg}"
            if st["bold"]:
                style += ";font-weight:bold"
            if st["dim"]:
                style += ";opacity:0.6"
                fg, bg = dim(fg), dim(bg)
            out.append((ch, style, fg, bg))
        if m:
            apply(m.group(1), st)
            pos = m.end()
    return out


def dim(colour):
    """A colour at opacity 0.6 over the page's black."""
    return "#%02x%02x%02x" % tuple(int(int(colour[i:i + 2], 16) * 0.6) for i in (1, 3, 5))


def row_html(line, st):
    return "".join(f'<span style="{style}">{html.escape(ch)}</span>'
                   for ch, style, _, _ in row_cells(line, st))


def lines_of(src):
    return open(src, encoding="utf-8", errors="replace").read().rstrip("\n").split("\n")


def cells(src):
    """Each row's cells as [character, fg, bg] (colours as drawn, `#rrggbb`): what the
    picture of the page must show (tests/suite/screenshot.rs compares them)."""
    st = dict(fg=None, bg=None, bold=False, dim=False, rev=False)
    return {"fg": FG, "bg": BG,
            "rows": [[[ch, fg, bg] for ch, _, fg, bg in row_cells(l, st)] for l in lines_of(src)]}


def main(src, dst, cols=None):
    lines = lines_of(src)
    st = dict(fg=None, bg=None, bold=False, dim=False, rev=False)
    rows = [f'<div class="r">{row_html(l, st)}</div>' for l in lines]
    page = f"""<!doctype html><meta charset="utf-8"><title>tpslab --live</title><style>
body {{ background:{BG}; margin:4px; }}
.r {{ font-family: 'DejaVu Sans Mono', monospace; font-size:14px; line-height:1.2em;
      height:1.2em; white-space:pre; display:flex; }}
.r span {{ display:inline-block; width:1ch; flex:none; overflow:hidden; text-align:center; }}
</style>
{chr(10).join(rows)}
"""
    open(dst, "w", encoding="utf-8").write(page)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--cells"] and len(sys.argv) == 3:
        json.dump(cells(sys.argv[2]), sys.stdout)
    elif len(sys.argv) == 3:
        main(sys.argv[1], sys.argv[2])
    else:
        sys.exit("usage: ansi_grid.py SCREEN.ansi OUT.html | ansi_grid.py --cells SCREEN.ansi")
