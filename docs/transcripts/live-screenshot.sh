# README: a screenshot of `--live` on a real run (`sh docs/transcripts/live-screenshot.sh
# OUT.png`, as root): `tpslab run udp` (tpslab's own server with a 64 KiB buffer, bursts
# of 200) under a 120x36 tmux in a network namespace of its own, captured 6 s in with its
# colours (`tmux capture-pane -e`), turned into HTML by docs/transcripts/ansi_grid.py (each
# character in a cell one column wide: braille, which DejaVu Sans Mono lacks, comes from a
# fallback font and cannot push its row) and photographed by headless chromium. The run then ends with q, as Ctrl-C ends it.
# The capture is kept beside the picture (OUT.ansi): tests/suite/screenshot.rs checks the
# picture shows it cell for cell (`cargo test --profile suite --test suite -- screenshot::`).
. docs/transcripts/lib.sh
out=$(realpath -m "${1:?usage: live-screenshot.sh OUT.png}")
# The namespace's shell makes a scratch folder of its own (lib.sh); it leaves the capture
# in this one's ($SHOT).
SHOT="$W" unshare -n sh -c '
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
  cp "$W/screen.ansi" "$SHOT/screen.ansi"
'
python3 docs/transcripts/ansi_grid.py "$W/screen.ansi" "$W/screen.html" || exit 1
# The picture first: the capture goes beside it only when the picture was made.
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1040,620 \
  --screenshot="$W/screen.png" "file://$W/screen.html" >/dev/null 2>&1 \
  && [ -s "$W/screen.png" ] || { echo "live-screenshot.sh: chromium made no picture" >&2; exit 1; }
mv "$W/screen.png" "$out"
mv "$W/screen.ansi" "${out%.png}.ansi"
echo "$out"
