# docs/s2-queue-under-pinning.md: drop reasons per cell, a sweep of the socket buffer alone.
. docs/transcripts/lib.sh
tpslab sweep --factor rcvbuf=16000000,8192 --repeat 3 --burst 1000 --burst-interval 20ms --duration 600ms --warmup 200ms --out "$W/sw" --json "$REC" 2>/dev/null
