# docs/own-server.md: a Python recvfrom loop sleeping 200 us per datagram
# (tests/servers/udp_server.py), given by its address alone, in a namespace of its own.
. docs/transcripts/lib.sh
unshare -n sh -c '
  ip link set lo up
  . docs/transcripts/lib.sh >/dev/null 2>&1
  python3 tests/servers/udp_server.py 9710 200 >/dev/null 2>&1 & s=$!
  wait_port 9710 udp
  tpslab diagnose udp 127.0.0.1:9710 --rate 10000 --duration 2s --json "$0" 2>/dev/null
  kill $s; wait $s
' "$REC"
