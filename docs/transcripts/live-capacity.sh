# docs/reference.md: a capacity search under --live, 9.5 s in, as `tmux capture-pane -p`
# reads it from a 100x34 terminal; the server `tpslab serve udp --rcvbuf 64k`, all in a
# network namespace of their own (the tmux server too: its own socket, -L).
. docs/transcripts/lib.sh
unshare -n sh -c '
  ip link set lo up
  . docs/transcripts/lib.sh >/dev/null 2>&1
  tpslab serve udp --bind 127.0.0.1:19995 --rcvbuf 64k >/dev/null 2>&1 & s=$!
  wait_port 19995 udp
  t="tmux -L tpslab-transcript-$$"
  $t new-session -d -x 100 -y 34 "echo \$\$ >$W/pid; exec tpslab capacity udp 127.0.0.1:19995 --pid $s --start-rate 2k --max-rate 64k --step-duration 1s --budget 30s --live 2>/dev/null"
  sleep 9.5
  $t capture-pane -p
  # q twice: the view quits at once (a search left without its terminal kept running).
  $t send-keys q; $t send-keys q
  c=$(cat $W/pid)
  for _ in $(seq 50); do kill -0 $c 2>/dev/null || break; sleep 0.1; done
  kill -0 $c 2>/dev/null && { echo "transcript: capacity $c still running after q q: killed" >&2; kill -KILL $c; }
  $t kill-server
  kill -INT $s; wait $s
'
