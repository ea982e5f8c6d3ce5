# docs/s5-idle-timeout.md: `tpslab probe idle ARGS` (the lab's middlebox, as root).
. docs/transcripts/lib.sh
tpslab probe idle "$@" --json "$REC" 2>/dev/null
