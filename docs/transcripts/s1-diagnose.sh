# S1's built-in case: `tpslab diagnose` (README.md's example, docs/s1-udp-loss.md).
# A run whose generator fell behind (other work on this host's CPUs) is no evidence about
# S1, and diagnose says so instead of a verdict: such a run is repeated, 3 tries at most.
. docs/transcripts/lib.sh
for try in 1 2 3; do
  tpslab diagnose --no-history --json "$REC" >"$W/out" 2>/dev/null
  grep -q '^VERDICT: The run is NOT valid evidence' "$W/out" || break
  echo "transcript: try $try: the generator was the bottleneck" >&2
done
cat "$W/out"
