# docs/own-server.md: `tpslab doctor` of this host.
. docs/transcripts/lib.sh
tpslab doctor --json "$REC" 2>/dev/null
