# docs/s5-idle-timeout.md: S5 in miniature, a pool behind a 3 s idle timeout.
. docs/transcripts/lib.sh
tpslab probe pool --lab-idle-timeout 3s --validate-every 5s --max-idle 8300ms --min-idle 2 --requests 6 --request-every 4s --query-timeout 2s --json "$REC" 2>/dev/null
