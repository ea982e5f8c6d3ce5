# docs/ledger.md: a firewall rule dropping one UDP datagram in ten, in a network namespace
# of its own; the run there, then the rule's own counter.
. docs/transcripts/lib.sh
unshare -n sh -c '
  ip link set lo up
  nft add table inet t && nft add chain inet t in "{ type filter hook input priority 0; }" &&
    nft add rule inet t in meta l4proto udp numgen inc mod 10 0 counter drop
  tpslab run udp --rate 20000 --duration 500ms --size 64 --rcvbuf 4000000 --json "$0" 2>/dev/null
' "$REC"
