# Sourced by every transcript script (docs/regen.py --lab runs them as root, `tpslab` on
# PATH the build under test): a scratch folder $W, removed at exit with whatever the script
# added to $CLEANUP (servers it started, by PID; namespaces); the history (XDG_DATA_HOME)
# kept there, so a transcript never writes into the user's; $REC, the record the block's
# report comes from, when regen.py keeps it.
W=$(mktemp -d /tmp/tpslab-transcript.XXXXXX)
export XDG_DATA_HOME="$W/xdg"
REC="${REC:-$W/record.json}"
CLEANUP=""
trap 'eval "$CLEANUP"; rm -rf "$W"' EXIT
# wait_port PORT [udp]: until something listens on 127.0.0.1:PORT (10 s at most).
wait_port() {
  for _ in $(seq 100); do
    if [ "${2:-tcp}" = udp ]; then ss -Hlun "sport = :$1" | grep -q . && return 0
    else ss -Hltn "sport = :$1" | grep -q . && return 0; fi
    sleep 0.1
  done
  echo "transcript: nothing listens on port $1" >&2
  return 1
}
