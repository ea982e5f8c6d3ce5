# docs/reports.md: two diagnoses of tpslab's server started by --server-cmd, the second with
# a larger buffer, compared; in a network namespace of their own.
. docs/transcripts/lib.sh
cd "$W" && unshare -n sh -c '
  ip link set lo up
  tpslab diagnose udp --server-cmd "tpslab serve udp --bind 127.0.0.1:{port}" --burst 2000 --burst-interval 50ms --duration 2s --warmup 500ms --no-verify --json small.json >/dev/null 2>&1
  tpslab diagnose udp --server-cmd "tpslab serve udp --bind 127.0.0.1:{port} --rcvbuf 16000000" --burst 2000 --burst-interval 50ms --duration 2s --warmup 500ms --no-verify --json big.json >/dev/null 2>&1
  tpslab compare small.json big.json --html compare.html --json "$0" 2>/dev/null
' "$REC"
