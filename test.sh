#!/usr/bin/env bash
# The test command (README.md; .ci/run calls it): every test binary, also after a failure
# (--no-fail-fast), then the tests that skipped, each with its reason, since cargo prints a
# skipped test as "ok" (a missing tool, no root, or a timing test that a busy machine
# spoiled in every attempt). Arguments are passed to `cargo test` (e.g. --test suite ledger::).
# Exits with cargo's status.
set -uo pipefail
cd "$(dirname "$0")"

# tests/common/mod.rs appends one line per skipped test here.
export TPSLAB_SKIP_LIST="${TPSLAB_SKIP_LIST:-$PWD/target/tpslab-skipped.txt}"
mkdir -p "$(dirname "$TPSLAB_SKIP_LIST")"
: > "$TPSLAB_SKIP_LIST"

# One lock for every test that changes host-wide state or checks it unchanged, shared by
# every test binary and by the suite of another clone on this host (tests/common/mod.rs
# host_lock; tpslab waits for it before it changes a setting).
export TPSLAB_HOST_LOCK="${TPSLAB_HOST_LOCK:-/tmp/tpslab-host-settings.lock}"

# One test at a time in every test binary (libtest's default is one per CPU): the
# integration tests are one binary (tests/suite), and a timing test or one that floods a
# CPU's backlog must not run beside another module's test, as when each file was a
# binary of its own (--test-threads N after -- overrides it).
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-1}"

start=$SECONDS
status=0
cargo test --workspace --release --no-fail-fast "$@" || status=$?

if [ -s "$TPSLAB_SKIP_LIST" ]; then
  echo "skipped tests: $(wc -l < "$TPSLAB_SKIP_LIST")"
  sed 's/^/  /' "$TPSLAB_SKIP_LIST"
else
  echo "skipped tests: none"
fi
took=$((SECONDS - start))
echo "test.sh: $((took / 60)) min $((took % 60)) s (compiling included), exit $status"
exit "$status"
