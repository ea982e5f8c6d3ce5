# docs/s1-udp-loss.md: the counters underneath, `tpslab run udp` in S1's bursts.
. docs/transcripts/lib.sh
tpslab run udp --rate 100000 --burst 5000 --burst-interval 50ms --duration 3s --json "$REC" 2>/dev/null
