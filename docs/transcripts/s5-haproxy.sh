# docs/s5-idle-timeout.md: `tpslab probe idle` through Debian's haproxy in TCP mode
# (`sh s5-haproxy.sh 3|33`: timeout client and server 3 s or 33 s) in front of tpslab's
# idle responder, all in a network namespace of their own.
. docs/transcripts/lib.sh
timeout=$1
cat > "$W/haproxy.cfg" <<CFG
global
    maxconn 100
defaults
    mode tcp
    timeout connect 2s
    timeout client ${timeout}s
    timeout server ${timeout}s
frontend f
    bind 127.0.0.1:18431
    default_backend b
backend b
    server s1 127.0.0.1:18432
CFG
unshare -n sh -c '
  ip link set lo up
  . docs/transcripts/lib.sh >/dev/null 2>&1
  tpslab probe idle-responder 127.0.0.1:18432 >/dev/null 2>&1 & r=$!
  /usr/sbin/haproxy -f "$0" -db </dev/null >/dev/null 2>&1 & h=$!
  wait_port 18431; wait_port 18432
  if [ "$2" = 33 ]; then
    tpslab probe idle 127.0.0.1:18431 --min 29s --max 36s --resolution 1s --json "$1" 2>/dev/null
  else
    tpslab probe idle 127.0.0.1:18431 --server-first --probe-data x --min 1s --max 6s --resolution 1s --connections 8 --json "$1" 2>/dev/null
  fi
  kill $h $r; wait $h $r 2>/dev/null
' "$W/haproxy.cfg" "$REC" "$timeout"
