# docs/s1-udp-loss.md: doctor judging S1's workload against this kernel (an empty tree, so
# only the workload is judged), writing the sysctl.d snippet.
. docs/transcripts/lib.sh
# /tmp/empty as the page says, made for the run (and removed) when it is not there.
[ -d /tmp/empty ] || { mkdir /tmp/empty && CLEANUP='rmdir /tmp/empty'; }
cd "$W" && tpslab doctor --root /tmp/empty --for udp --rate 100000 --burst 5000 --size 1024 --write-snippet 60-udp.conf 2>&1
