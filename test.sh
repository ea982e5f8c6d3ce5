#!/usr/bin/env bash
# The test command (README.md; .ci/run calls it): every test binary, also after a failure
# (--no-fail-fast), then the tests that skipped, each with its reason, since cargo prints a
# skipped test as "ok" (a missing tool, no root, or a timing test that a busy machine
# spoiled in every attempt), the attempts a busy machine spoiled and the slowest tests.
# Arguments are passed to `cargo test` (e.g. --test suite ledger::); without them the
# integration suite starts as soon as its binary is built, while the other test binaries
# build at idle priority, and its quiet tests run in a second process beside the rest
# (below). Exits with cargo's status (the first failing one's, when several fail).
set -uo pipefail
cd "$(dirname "$0")"

# tests/common/mod.rs appends one line per skipped test here.
export TPSLAB_SKIP_LIST="${TPSLAB_SKIP_LIST:-$PWD/target/tpslab-skipped.txt}"
mkdir -p "$(dirname "$TPSLAB_SKIP_LIST")"
: > "$TPSLAB_SKIP_LIST"

# tests/common/turn.rs appends each suite test's seconds (total, waiting for its turn),
# turn and name here; the slowest are printed at the end.
export TPSLAB_TEST_TIMES="${TPSLAB_TEST_TIMES:-$PWD/target/tpslab-test-times.txt}"
: > "$TPSLAB_TEST_TIMES"
# tests/common/retry.rs appends each spoiled attempt of a timing test here (printed at the end).
export TPSLAB_TEST_RETRIES="${TPSLAB_TEST_RETRIES:-$PWD/target/tpslab-test-retries.txt}"
: > "$TPSLAB_TEST_RETRIES"

# One lock for every test that changes host-wide state or checks it unchanged, shared by
# every test binary and by the suite of another clone on this host (tests/common/mod.rs
# host_lock; tpslab waits for it before it changes a setting).
export TPSLAB_HOST_LOCK="${TPSLAB_HOST_LOCK:-/tmp/tpslab-host-settings.lock}"

# Who runs beside whom (tests/common/turn.rs): a timing test (common::serial) runs alone,
# ordinary tests run beside each other, quiet ones (mostly waiting) beside anything; across
# processes, the same turns are flocks on $TPSLAB_TURN_LOCK, shared by every clone's suite
# on this host. Three at a time: on 2 CPUs most tests wait on servers, timers and runs of
# a fixed length (--test-threads N after -- overrides it).
export TPSLAB_TURN_LOCK="${TPSLAB_TURN_LOCK:-/tmp/tpslab-turn.lock}"
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-3}"

# Back to normal priority: PID's process tree, every thread of each (the scheduling policy
# and nice value are a thread's: rustc compiles on threads of its own), each process before
# its children (those it starts later inherit its priority). Needs root (as a user the
# kernel refuses to leave SCHED_IDLE); 1 when a thread could not be changed.
unidle() {
  local c t ok=0
  for t in /proc/"$1"/task/*; do
    chrt -o -p 0 "${t##*/}" > /dev/null 2>&1 && renice -n 0 -p "${t##*/}" > /dev/null 2>&1 \
      || [ ! -e "$t" ] || ok=1
  done
  for c in $(pgrep -P "$1" 2> /dev/null); do unidle "$c" || ok=1; done
  return "$ok"
}

# The tests build with `--profile suite` (Cargo.toml: release, the cold crates at opt-level
# 0); cargo refuses --release beside it.
for a in "$@"; do
  if [ "$a" = --release ]; then
    echo "test.sh: --release is not needed: the tests build with --profile suite (Cargo.toml)" >&2
    exit 2
  fi
done

start=$SECONDS
status=0
if [ $# -gt 0 ]; then
  cargo test --workspace --profile suite --no-fail-fast "$@" || status=$?
else
  # 1. What the integration suite (tests/suite, the long part) needs: its binary and
  #    tpslab's. --workspace resolves features as the full build below does, so nothing
  #    is built twice.
  suite_json="$(mktemp -t tpslab-suite-build.XXXXXX)"
  if cargo test --workspace --profile suite --test suite --no-run \
      --message-format=json-render-diagnostics > "$suite_json"; then
    suite="$(grep -o '"executable":"[^"]*/deps/suite-[^"]*"' "$suite_json" | tail -n 1 \
      | sed 's/^"executable":"//; s/"$//')"
  else
    status=$?
  fi
  rm -f "$suite_json"
  if [ "$status" -eq 0 ] && [ -x "${suite:-}" ]; then
    # 2. Every other test binary builds meanwhile at idle priority (SCHED_IDLE: it gets
    #    only CPU time the suite leaves), then runs after the suite (step 4).
    rest_log="$(mktemp -t tpslab-rest-build.XXXXXX)"
    idle=()
    if chrt -i 0 true > /dev/null 2>&1; then idle=(chrt -i 0); fi
    built=$SECONDS
    rest_ready="$(mktemp -t tpslab-rest-ready.XXXXXX)"
    (
      nice -n 19 ${idle[@]+"${idle[@]}"} cargo test --workspace --profile suite --no-run > "$rest_log" 2>&1
      r=$?
      echo "$SECONDS" > "$rest_ready"
      exit "$r"
    ) &
    rest_pid=$!
    # Background jobs of a script ignore SIGINT: on Ctrl-C (or TERM) end them too, or the
    # build would hold cargo's lock and the quiet tests write into the next run's lists.
    quiet_pid=
    stop_jobs() {
      local p
      for p in $quiet_pid $(pgrep -P "$rest_pid" 2> /dev/null) "$rest_pid"; do
        pkill -TERM -P "$p" 2> /dev/null
        kill -TERM "$p" 2> /dev/null
      done
      rm -f "$rest_log" "$rest_ready" "${quiet_log:-}"
    }
    trap 'stop_jobs; exit 130' INT
    trap 'stop_jobs; exit 143' TERM
    # 3. The suite, run directly (cargo's build lock is the build's above): the quiet
    #    modules (their tests call common::quiet(): they mostly wait out idle intervals)
    #    in a second process beside the rest, so they wait beside the timing tests
    #    instead of after them; their output follows the rest's. A test's name matching
    #    one of these filters runs there, every other one here.
    quiet=(probe:: probe_proxy:: probe_behaviour::)
    skips=()
    for q in "${quiet[@]}"; do skips+=(--skip "$q"); done
    quiet_log="$(mktemp -t tpslab-quiet-tests.XXXXXX)"
    echo "     Running tests/suite/main.rs ($suite)"
    "$suite" "${quiet[@]}" > "$quiet_log" 2>&1 &
    quiet_pid=$!
    "$suite" "${skips[@]}" || status=$?
    wait "$quiet_pid" || { q=$?; [ "$status" -ne 0 ] || status=$q; }
    echo "--- the quiet tests (${quiet[*]}), run beside the rest:"
    cat "$quiet_log"
    rm -f "$quiet_log"
    suite_done=$SECONDS
    # 4. The other binaries (the crates' unit and integration tests, the doc tests): their
    #    build, if not done yet, goes on at normal priority (beside a busy neighbour an idle
    #    one would wait for it to end), then they run.
    if [ ! -s "$rest_ready" ] && ! unidle "$rest_pid"; then
      # Not root: an idle build beside a busy neighbour could wait for it to end; cargo
      # here builds what is left at this shell's priority (finished units are kept).
      pkill -TERM -P "$rest_pid" 2> /dev/null
      kill -TERM "$rest_pid" 2> /dev/null
      wait "$rest_pid" 2> /dev/null
      cargo test --workspace --profile suite --no-run > "$rest_log" 2>&1
      rest_rc=$?
      echo "$SECONDS" > "$rest_ready"
    else
      wait "$rest_pid"
      rest_rc=$?
    fi
    trap - INT TERM
    if [ "$rest_rc" -eq 0 ]; then
      rest=(--lib --bins)
      for t in $(sed -n '/^\[\[test\]\]/{n;s/^name = "\(.*\)"$/\1/p}' crates/*/Cargo.toml); do
        rest+=(--test "$t")
      done
      cargo test --workspace --profile suite --no-fail-fast "${rest[@]}" \
        || { r=$?; [ "$status" -ne 0 ] || status=$r; }
      cargo test --workspace --profile suite --no-fail-fast --doc \
        || { r=$?; [ "$status" -ne 0 ] || status=$r; }
    else
      cat "$rest_log"
      [ "$status" -ne 0 ] || status=$rest_rc
    fi
    phases="; the suite's binary built at $((built - start)) s, the suite ran $((suite_done - built)) s"
    phases+=", the other test binaries were built at $(($(cat "$rest_ready" 2> /dev/null || echo "$SECONDS") - start)) s"
    phases+=" and ran $((SECONDS - suite_done)) s after the suite"
    rm -f "$rest_log" "$rest_ready"
  elif [ "$status" -eq 0 ]; then
    echo "test.sh: cargo built no tests/suite binary" >&2
    status=1
  fi
fi

if [ -s "$TPSLAB_SKIP_LIST" ]; then
  echo "skipped tests: $(wc -l < "$TPSLAB_SKIP_LIST")"
  sed 's/^/  /' "$TPSLAB_SKIP_LIST"
else
  echo "skipped tests: none"
fi
if [ -s "$TPSLAB_TEST_TIMES" ]; then
  echo "slowest suite tests (s running, s waiting for a turn before, turn, name; all in $TPSLAB_TEST_TIMES):"
  awk -F'\t' -v OFS='\t' '{ printf "%.1f\t%s\t%s\t%s\n", $1 - $2, $2, $3, $4 }' "$TPSLAB_TEST_TIMES" \
    | sort -rn | head -n 15 | sed 's/^/  /'
fi
if [ -s "$TPSLAB_TEST_RETRIES" ]; then
  echo "attempts a busy machine spoiled (each test retried them; all in $TPSLAB_TEST_RETRIES): $(wc -l < "$TPSLAB_TEST_RETRIES")"
  cut -c1-240 "$TPSLAB_TEST_RETRIES" | sed 's/^/  /'
fi
took=$((SECONDS - start))
echo "test.sh: $((took / 60)) min $((took % 60)) s (compiling included${phases:-}), exit $status"
exit "$status"
