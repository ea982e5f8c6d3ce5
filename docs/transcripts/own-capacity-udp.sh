# docs/own-server.md: capacity of the reference server with 1 ms of work per datagram on
# one SCHED_FIFO thread, in a network namespace of its own.
. docs/transcripts/lib.sh
unshare -n sh -c '
  ip link set lo up
  . docs/transcripts/lib.sh >/dev/null 2>&1
  tpslab serve udp --bind 127.0.0.1:9102 --work 1ms --sched fifo:10 --cpus 1 >/dev/null 2>&1 & s=$!
  wait_port 9102 udp
  chrt -f 5 tpslab capacity udp 127.0.0.1:9102 --load-cpus 0 --start-rate 250 --step-duration 1s --warmup 300ms --budget 60s --json "$0" 2>/dev/null
  kill -INT $s; wait $s
' "$REC"
