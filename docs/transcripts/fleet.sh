# docs/fleet.md: three agents in namespaces of their own loading a server in a fourth over
# a bridge, started together by `fleet ssh --ssh "ip netns exec"`, merged with the server's
# watch. The namespaces and the bridge are removed at exit.
. docs/transcripts/lib.sh
for ns in srv agent0 agent1 agent2; do
  if ip netns list | grep -qw "$ns"; then echo "transcript: namespace $ns exists: left alone" >&2; exit 1; fi
done
CLEANUP='for ns in srv agent0 agent1 agent2; do ip netns del $ns 2>/dev/null; done'
cd "$W"
ip netns add srv; ip -n srv link add br0 type bridge
ip -n srv addr add 10.203.0.1/24 dev br0; ip -n srv link set br0 up
for i in 0 1 2; do
  ip netns add agent$i
  ip -n agent$i link add eth0 type veth peer name p$i netns srv
  ip -n srv link set p$i master br0 up
  ip -n agent$i addr add 10.203.0.1$i/24 dev eth0; ip -n agent$i link set eth0 up
done
cat > plan.toml <<'PLAN'
target = "10.203.0.1:9000"
rate = "30000"            # all agents together
size = 64
duration = "2s"
warmup = "500ms"
max_clock_error = "unchecked"   # the agents share this machine's clock
PLAN
ip netns exec srv tpslab serve udp --bind 0.0.0.0:9000 --duration 60s >/dev/null 2>&1 & s=$!
sleep 0.5
ip netns exec srv tpslab watch --pid $s --duration 60s --json server.json >/dev/null 2>&1 & w=$!
sleep 0.5
tpslab fleet ssh agent0,agent1,agent2 --plan plan.toml --ssh "ip netns exec" --start-in 3s --out records --run >/dev/null 2>&1
kill -INT $w; wait $w
kill -INT $s; wait $s
tpslab merge records/agent-*.json --server server.json --json "$REC" 2>/dev/null
