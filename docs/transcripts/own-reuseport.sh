# docs/own-server.md: a SO_REUSEPORT group of 4 loaded by 2 flows.
. docs/transcripts/lib.sh
unshare -n sh -c '
  ip link set lo up
  . docs/transcripts/lib.sh >/dev/null 2>&1
  tpslab serve udp --bind 127.0.0.1:9101 --threads 4 --rcvbuf 16KiB --work 20us >/dev/null 2>&1 & s=$!
  wait_port 9101 udp
  # A run whose generator fell behind (other work on the CPUs) is no evidence: 3 tries.
  for try in 1 2 3; do
    tpslab diagnose udp 127.0.0.1:9101 --threads 2 --flows 2 --rate 20k --burst 100 --burst-interval 5ms --size 64 --duration 2s --json "$0" >"$W/out" 2>/dev/null
    grep -q "^VERDICT: The run is NOT valid evidence" "$W/out" || break
  done
  cat "$W/out"
  kill -INT $s; wait $s
' "$REC"
