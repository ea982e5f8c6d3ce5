# docs/own-server.md: S1's server in miniature (tests/servers/UdpServer.java), started by
# tpslab so the fix is proven on it, in a network namespace of its own.
. docs/transcripts/lib.sh
cd tests/servers && unshare -n sh -c '
  ip link set lo up
  tpslab diagnose udp --server-cmd "java UdpServer.java {port}" --burst 1000 --burst-interval 50ms --duration 3s --warmup 1s --verify --json "$0" 2>/dev/null
' "$REC"
