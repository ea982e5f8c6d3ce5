# docs/ci.md: a gate that fails (stderr and the exit code), then one that passes (the
# report's verdict on the generator, and the exit code): `sh ci-gate.sh fail|pass`.
. docs/transcripts/lib.sh
if [ "$1" = fail ]; then
  tpslab run udp --rate 20000 --burst 200 --burst-interval 10ms --rcvbuf 20000 --duration 1s --fail-on 'loss>1%' >/dev/null 2>"$W/err"
  rc=$?
  grep -v '^tpslab: record' "$W/err"
else
  tpslab run udp --rate 10000 --duration 1s --strict --fail-on 'loss>1%,invalid' >"$W/out" 2>/dev/null
  rc=$?
  grep -E '^(Generator|RUN INVALID)' "$W/out"
fi
echo "exit $rc"
