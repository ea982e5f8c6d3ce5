# docs/s1-udp-loss.md: S1 before and after in one command: the reference server (never sets
# SO_RCVBUF: the default buffer) started by tpslab (--server-cmd), one SCHED_FIFO thread on
# CPU 1, bursts of 200 from CPU 0; --fix-and-retry applies the verdict's fix
# (net.core.rmem_default, restored after) and searches again on the server started again.
# In a network namespace of their own (unshare -n: its loopback only).
. docs/transcripts/lib.sh
unshare -n sh -c '
  ip link set lo up
  . docs/transcripts/lib.sh >/dev/null 2>&1
  chrt -f 5 tpslab capacity udp --server-cmd "tpslab serve udp --bind 127.0.0.1:{port} --sched fifo:10 --cpus 1 --no-history" --fix-and-retry --burst 200 --load-cpus 0 --no-drop-reasons --start-rate 10k --step-duration 1s --warmup 300ms --budget 60s --json "$0" 2>/dev/null
' "$REC"
