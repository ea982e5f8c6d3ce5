# docs/own-server.md: capacity tcp against a prefork Python server (tests/servers/
# tcp_server.py: a master that listens and waits, two worker processes doing 500 us of CPU
# work a request, all on CPU 1), started by --server-cmd, in a network namespace of its own.
. docs/transcripts/lib.sh
unshare -n sh -c '
  ip link set lo up
  . docs/transcripts/lib.sh >/dev/null 2>&1
  tpslab capacity tcp --server-cmd "taskset -c 1 python3 tests/servers/tcp_server.py prefork {port} 2 500" --start-rate 500 --step-duration 1s --warmup 300ms --repeats 1 --budget 40s --json "$0" 2>/dev/null
' "$REC"
