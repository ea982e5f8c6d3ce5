# docs/monitoring.md: a scrape of --metrics-listen 2.5 s into a run (`sh monitoring.sh
# scrape`), and the --metrics-file it writes at the end (`sh monitoring.sh file`); in a
# network namespace of its own (its own 127.0.0.1:19464).
. docs/transcripts/lib.sh
cd "$W" && unshare -n sh -c '
  ip link set lo up
  tpslab run udp --rate 20000 --burst 200 --burst-interval 10ms --rcvbuf 20000 --duration 3s --size 64 --metrics-listen 127.0.0.1:19464 --metrics-file run.prom >/dev/null 2>&1 & p=$!
  sleep 2.5
  curl -s http://127.0.0.1:19464/metrics > scrape.txt
  wait $p
'
if [ "$1" = scrape ]; then cat "$W/scrape.txt"; else cat "$W/run.prom"; fi
