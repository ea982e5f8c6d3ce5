# docs/s1-udp-loss.md: capacity of the reference server in bursts of 200, with the default
# buffer (`sh s1-capacity.sh`) or with `--rcvbuf 4MiB` (`sh s1-capacity.sh 4MiB`): the
# server one SCHED_FIFO thread on CPU 1, the generator on CPU 0, in a network namespace of
# their own (unshare -n: its loopback only).
. docs/transcripts/lib.sh
unshare -n sh -c '
  ip link set lo up
  . docs/transcripts/lib.sh >/dev/null 2>&1
  if [ "$1" = 4MiB ]; then
    tpslab serve udp --bind 127.0.0.1:9100 --sched fifo:10 --cpus 1 --rcvbuf 4MiB >/dev/null 2>&1 &
  else
    tpslab serve udp --bind 127.0.0.1:9100 --sched fifo:10 --cpus 1 >/dev/null 2>&1 &
  fi
  s=$!
  wait_port 9100 udp
  chrt -f 5 tpslab capacity udp 127.0.0.1:9100 --burst 200 --load-cpus 0 --no-drop-reasons --start-rate 10k --step-duration 1s --warmup 300ms --budget 60s --json "$0" 2>/dev/null
  kill -INT $s; wait $s
' "$REC" "${1:-}"
