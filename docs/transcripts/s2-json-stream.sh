# docs/s2-queue-under-pinning.md: one line of --json-stream (the third sample).
. docs/transcripts/lib.sh
cd "$W" && tpslab run udp --rate 20000 --burst 200 --burst-interval 10ms --rcvbuf 20000 --interval 100ms --json-stream s.ndjson >/dev/null 2>&1
sed -n 3p "$W/s.ndjson"
