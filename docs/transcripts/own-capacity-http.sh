# docs/own-server.md: capacity http against serve http --serial 1ms --serialize (at most
# 1,000 requests/s), in a network namespace of its own.
. docs/transcripts/lib.sh
unshare -n sh -c '
  ip link set lo up
  . docs/transcripts/lib.sh >/dev/null 2>&1
  tpslab serve http --bind 127.0.0.1:18080 --serial 1ms --serialize >/dev/null 2>&1 & s=$!
  wait_port 18080
  tpslab capacity http http://127.0.0.1:18080/ --start-rate 250 --step-duration 1s --warmup 300ms --budget 60s --json "$0" 2>/dev/null
  kill -INT $s; wait $s
' "$REC"
