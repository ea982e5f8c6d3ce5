# docs/reports.md: two run udp (--rcvbuf 20000, then without) and a diagnose --no-verify
# into an empty history, then `tpslab history --kind udp_run`.
. docs/transcripts/lib.sh
export XDG_DATA_HOME=/tmp/xdgdemo
rm -rf /tmp/xdgdemo
CLEANUP="rm -rf /tmp/xdgdemo"
tpslab run udp --rcvbuf 20000 --duration 1s >/dev/null 2>&1
tpslab run udp --duration 1s >/dev/null 2>&1
tpslab diagnose --no-verify >/dev/null 2>&1
tpslab history --kind udp_run
