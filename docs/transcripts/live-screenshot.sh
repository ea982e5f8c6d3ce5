# README: a screenshot of `--live` on a real run (`sh docs/transcripts/live-screenshot.sh
# OUT.png`, as root): `tpslab run udp` (tpslab's own server with a 64 KiB buffer, bursts
# of 200) under a 120x36 tmux in a network namespace of its own, captured 6 s in with its
# colours (`tmux capture-pane -e`), turned into HTML by ansi2html (pip install ansi2html)
# and photographed by headless chromium. The run then ends with q, as Ctrl-C ends it.
. docs/transcripts/lib.sh
out=$(realpath -m "${1:?usage: live-screenshot.sh OUT.png}")
unshare -n sh -c '
  ip link set lo up
  . docs/transcripts/lib.sh >/dev/null 2>&1
  t="tmux -L tpslab-shot-$$"
  $t new-session -d -x 120 -y 36 "echo \$\$ >$W/pid; exec tpslab run udp --rate 20k --burst 200 --burst-interval 10ms --rcvbuf 64k --duration 12s --no-history --live 2>/dev/null"
  sleep 6
  $t capture-pane -p -e >"$W/screen.ansi"
  $t send-keys q
  c=$(cat $W/pid)
  for _ in $(seq 50); do kill -0 $c 2>/dev/null || break; sleep 0.1; done
  kill -0 $c 2>/dev/null && { echo "screenshot: run $c still running after q: killed" >&2; kill -KILL $c; }
  $t kill-server
  cp "$W/screen.ansi" /tmp/tpslab-live-screen.ansi
'
python3 -c '
import sys
from ansi2html import Ansi2HTMLConverter
text = open("/tmp/tpslab-live-screen.ansi", encoding="utf-8", errors="replace").read()
html = Ansi2HTMLConverter(dark_bg=True, font_size="14px", line_wrap=False, title="tpslab --live").convert(text)
# One terminal row per line, monospace cells as the terminal drew them.
html = html.replace("</style>", "pre, .body_foreground { font-family: DejaVu Sans Mono, monospace; line-height: 1.2; white-space: pre; margin: 4px; }\n</style>", 1)
open(sys.argv[1], "w").write(html)
' "$W/screen.html"
rm -f /tmp/tpslab-live-screen.ansi
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1040,790 \
  --screenshot="$out" "file://$W/screen.html" >/dev/null 2>&1
echo "$out"
