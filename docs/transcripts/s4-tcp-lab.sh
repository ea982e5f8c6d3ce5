# docs/s4-wan-buffers.md: S4's 64 KiB buffers over a 30 ms lab WAN, then the bdp buffers.
. docs/transcripts/lib.sh
tpslab tcp --lab-rtt 30ms --lab-rate 622mbit --sndbuf 64KiB --sink-rcvbuf 64KiB --target-rate 80mbit --duration 5s --json "$REC" 2>/dev/null
