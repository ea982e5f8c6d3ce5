# docs/faq.md: S2's sweep study (RUN INVALID when the generator cannot keep 150 k pps): the
# first lines of its first run's report (up to its first table), `--`, then the sweep's
# own end (its best-cell line and its warnings).
. docs/transcripts/lib.sh
tpslab sweep --scenario s2 --out "$W/s2sweep" --json "$W/s2sweep.json" >"$W/out" 2>"$W/err"
tpslab report "$W/s2sweep/cell00-rep0.json" | awk '/^┌/ {exit} {print}'
echo --
grep -E '^  - no best cell|^Best cell|^warning: ' "$W/out"
