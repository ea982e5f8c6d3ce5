#!/usr/bin/env bash
# The generator's and the reference server's scaling against the kernel-limit programs, in
# one command, on any x86-64 Linux host (loopback only, no package installs, ~3 minutes).
#
#   bench/scale.sh [-b TPSLAB] [-l LIMITS_DIR] [-s SECONDS] [-r PPS] [-n "1 2 4 8"] [-R ROUNDS]
#
# Needs: a release tpslab (-b, default target/release/tpslab beside this script), udpsend and
# udprecv built from ../shared/limits (-l: the folder holding the two programs;
# `gcc -O2 -pthread -o udpsend udpsend.c; gcc -O2 -o udprecv udprecv.c`), taskset, root for
# the larger socket buffers; perf for the cost per datagram (without it that part says so).
# Parts:
#   1. cost per datagram sent at a fixed rate below saturation (-r per sender, default 50000),
#      N = 1 and 2 tpslab sender threads against N kernel-limit senders: perf stat (task-clock,
#      and cycles and cache misses where the host counts them) attached for SECONDS-1 s;
#   2. `load udp --threads N --rate max` against N kernel-limit senders (sendmmsg 64), 64 and
#      1024 B, datagrams sent per second;
#   3. `serve udp --threads N --reuseport-steer cpu` against N kernel-limit receivers, N
#      kernel-limit senders at full speed (sender i on CPU i), datagrams received per second.
# N for parts 2 and 3: -n, default 1 2 4 8 ... up to half the CPUs (senders and receivers
# each on their own CPUs). Each figure is the mean of ROUNDS runs (default 2).
set -u
here=$(cd "$(dirname "$0")" && pwd)
TPSLAB="$here/../target/release/tpslab"
LIMITS="$here/../../shared/limits"
SECS=3
RATE=50000
NS=""
ROUNDS=2
while getopts "b:l:s:r:n:R:h" o; do
    case $o in
    b) TPSLAB=$OPTARG ;;
    l) LIMITS=$OPTARG ;;
    s) SECS=$OPTARG ;;
    r) RATE=$OPTARG ;;
    n) NS=$OPTARG ;;
    R) ROUNDS=$OPTARG ;;
    *) sed -n '2,20p' "$0"; exit 2 ;;
    esac
done
for p in "$TPSLAB" "$LIMITS/udpsend" "$LIMITS/udprecv"; do
    [ -x "$p" ] || { echo "scale.sh: $p: not an executable (see -b, -l)" >&2; exit 2; }
done
CPUS=$(nproc)
if [ -z "$NS" ]; then
    NS=1
    n=2
    while [ $((2 * n)) -le "$CPUS" ]; do NS="$NS $n"; n=$((2 * n)); done
fi
OUT=$(mktemp -d /tmp/tpslab-scale.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    rm -rf "$OUT"
}
trap cleanup EXIT
PORT=$((30000 + RANDOM % 20000))

# CPU lists: senders on 0..N-1, receivers on N..2N-1 when the host has them, else all.
cpus() { seq -s, "$1" $(($1 + $2 - 1)); }
rcpus() { if [ $((2 * $1)) -le "$CPUS" ]; then cpus "$1" "$1"; else cpus 0 "$CPUS"; fi; }
# The first number after "KEY": in a JSON record.
jnum() { grep -o "\"$2\": *[0-9.e+-]*" "$1" | head -1 | sed 's/.*: *//'; }
# KEY=value from a kernel-limit program's last line.
kv() { tail -1 "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
mean() { awk '{ s += $1; n++ } END { if (n) printf "%.6g", s / n; else print "nan" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

# A sink for the send parts: tpslab's server with N threads, on the receiver CPUs.
sink() { # port threads
    taskset -c "$(rcpus "$2")" "$TPSLAB" serve udp --mode sink --bind "127.0.0.1:$1" --threads "$2" \
        --batch 64 --duration $((SECS + 30))s >/dev/null 2>&1 &
    SINK=$!
    PIDS+=("$SINK")
    sleep 0.5
}
unsink() { kill "$SINK" 2>/dev/null; wait "$SINK" 2>/dev/null; }

model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo "tpslab scale study, $(date -u '+%Y-%m-%d %H:%M UTC'): ${model:-unknown CPU}, $CPUS CPUs, kernel $(uname -r)"
echo "  $("$TPSLAB" --version 2>/dev/null | head -1) ($TPSLAB); N = $NS; $SECS s runs, mean of $ROUNDS"

# 1. Cost per datagram at a fixed rate.
PERF=""
if command -v perf >/dev/null 2>&1; then
    PERF=perf
    perf stat -e task-clock -x, -o "$OUT/probe" -- true 2>/dev/null || PERF=""
fi
echo
if [ -z "$PERF" ]; then
    echo "cost per datagram: skipped (perf is missing or cannot count here)"
else
    echo "cost per datagram sent at $RATE pps per sender (perf stat attached for $((SECS - 1)) s; CPU = task-clock)"
    printf "  %-3s %-14s %14s %14s %18s\n" N tool "CPU ns/dgram" "cycles/dgram" "cache-misses/dgram"
    # perf stat -p PIDS for SECS-1 s, 0.5 s into the run: counters per datagram of that window.
    measure() { # label n pids...
        local label=$1 n=$2
        shift 2
        sleep 0.5
        perf stat -x, -e task-clock,cycles,cache-misses -p "$(echo "$@" | tr ' ' ,)" -o "$OUT/perf" \
            -- sleep $((SECS - 1)) 2>/dev/null
        local d=$((n * RATE * (SECS - 1)))
        awk -F, -v d="$d" '
            $3 == "task-clock" { t = $1 * 1e6 / d }
            $3 ~ /^cycles/ { c = ($1 ~ /^[0-9.]+$/) ? sprintf("%.0f", $1 / d) : "n/a" }
            $3 ~ /^cache-misses/ { m = ($1 ~ /^[0-9.]+$/) ? sprintf("%.2f", $1 / d) : "n/a" }
            END { printf "%.0f %s %s\n", t, c, m }' "$OUT/perf" >>"$OUT/cost-$label-$n"
    }
    for n in 1 2; do
        for r in $(seq "$ROUNDS"); do
            PORT=$((PORT + 1))
            sink "$PORT" "$n"
            taskset -c "$(cpus 0 "$n")" "$TPSLAB" load udp "127.0.0.1:$PORT" --threads "$n" \
                --rate $((n * RATE)) --no-replies --size 64 --duration ${SECS}s --warmup 0s \
                --interval 100ms --json "$OUT/cost.json" >/dev/null 2>&1 &
            L=$!
            measure tpslab "$n" "$L"
            wait "$L"
            unsink
            PORT=$((PORT + 1))
            sink "$PORT" "$n"
            KP=()
            for i in $(seq 0 $((n - 1))); do
                taskset -c "$i" "$LIMITS/udpsend" -a 127.0.0.1 -p "$PORT" -s 64 -t "$SECS" -m sendmmsg \
                    -b 64 -r "$RATE" >/dev/null 2>&1 &
                KP+=($!)
            done
            measure kernel "$n" "${KP[@]}"
            wait "${KP[@]}"
            unsink
        done
        for t in tpslab kernel; do
            read -r c y m < <(awk '{ c += $1; if ($2 != "n/a") { y += $2; ny++ } if ($3 != "n/a") { m += $3; nm++ } }
                END { printf "%.0f %s %s\n", c / NR, ny ? sprintf("%.0f", y / ny) : "n/a", nm ? sprintf("%.2f", m / nm) : "n/a" }' \
                "$OUT/cost-$t-$n")
            eval "cost_${t}_$n=$c cyc_${t}_$n=$y"
            printf "  %-3s %-14s %14s %14s %18s\n" "$n" "$([ $t = kernel ] && echo kernel-limit || echo tpslab)" "$c" "$y" "$m"
        done
    done
    echo "  tpslab 2 threads / 1 thread: CPU $(ratio "$cost_tpslab_2" "$cost_tpslab_1")x (kernel-limit 2/1: $(ratio "$cost_kernel_2" "$cost_kernel_1")x);" \
        "tpslab / kernel-limit: N=1 $(ratio "$cost_tpslab_1" "$cost_kernel_1")x, N=2 $(ratio "$cost_tpslab_2" "$cost_kernel_2")x"
    if [ "$cyc_tpslab_1" != "n/a" ]; then
        echo "  cycles: tpslab 2/1 $(ratio "$cyc_tpslab_2" "$cyc_tpslab_1")x, tpslab / kernel-limit N=1 $(ratio "$cyc_tpslab_1" "$cyc_kernel_1")x, N=2 $(ratio "$cyc_tpslab_2" "$cyc_kernel_2")x"
    else
        echo "  cycles and cache misses: not counted on this host (no hardware counters, e.g. a VM); CPU time stands in"
    fi
fi

# 2. Sending at --rate max.
echo
echo "send at --rate max: load udp --threads N vs N kernel-limit senders (sendmmsg 64), datagrams sent/s"
printf "  %-3s %5s %14s %14s %7s\n" N size tpslab kernel-limit ratio
for n in $NS; do
    for size in 64 1024; do
        : >"$OUT/t" && : >"$OUT/k"
        for r in $(seq "$ROUNDS"); do
            PORT=$((PORT + 1))
            sink "$PORT" "$n"
            taskset -c "$(cpus 0 "$n")" "$TPSLAB" load udp "127.0.0.1:$PORT" --threads "$n" --rate max \
                --no-replies --size "$size" --duration ${SECS}s --warmup 0s --interval 100ms \
                --json "$OUT/max.json" >/dev/null 2>&1
            jnum "$OUT/max.json" achieved_pps >>"$OUT/t"
            unsink
            PORT=$((PORT + 1))
            sink "$PORT" "$n"
            KP=()
            for i in $(seq 0 $((n - 1))); do
                taskset -c "$i" "$LIMITS/udpsend" -a 127.0.0.1 -p "$PORT" -s "$size" -t "$SECS" -m sendmmsg \
                    -b 64 >"$OUT/ks$i" 2>&1 &
                KP+=($!)
            done
            wait "${KP[@]}"
            for i in $(seq 0 $((n - 1))); do kv "$OUT/ks$i" pps; done | awk '{ s += $1 } END { print s }' >>"$OUT/k"
            unsink
        done
        t=$(mean <"$OUT/t") k=$(mean <"$OUT/k")
        printf "  %-3s %5s %14.0f %14.0f %6sx\n" "$n" "$size" "$t" "$k" "$(ratio "$t" "$k")"
    done
done

# 3. Receiving.
echo
echo "receive: serve udp --threads N --reuseport-steer cpu vs N kernel-limit receivers (recvmmsg 64),"
echo "  N kernel-limit senders at full speed (64 B, sender i on CPU i), datagrams received/s"
printf "  %-3s %14s %14s %7s   %s\n" N tpslab kernel-limit ratio "tpslab per thread"
for n in $NS; do
    : >"$OUT/t" && : >"$OUT/k"
    for r in $(seq "$ROUNDS"); do
        PORT=$((PORT + 1))
        taskset -c "$(rcpus "$n")" "$TPSLAB" serve udp --mode sink --bind "127.0.0.1:$PORT" --threads "$n" \
            --batch 64 --rcvbuf 16MiB --reuseport-steer cpu --duration $((SECS + 3))s \
            --json "$OUT/serve.json" >/dev/null 2>&1 &
        S=$!
        PIDS+=("$S")
        sleep 0.5
        KP=()
        for i in $(seq 0 $((n - 1))); do
            taskset -c "$i" "$LIMITS/udpsend" -a 127.0.0.1 -p "$PORT" -s 64 -t "$SECS" -m sendmmsg -b 64 \
                >/dev/null 2>&1 &
            KP+=($!)
        done
        wait "${KP[@]}"
        wait "$S"
        got=$(jnum "$OUT/serve.json" received)
        awk -v g="$got" -v s="$SECS" 'BEGIN { print g / s }' >>"$OUT/t"
        per=$(tr -d ' \n' <"$OUT/serve.json" | grep -o '"received_per_thread":\[[0-9,]*\]' | sed 's/.*\[//; s/\]//')
        PORT=$((PORT + n))
        KR=()
        for i in $(seq 0 $((n - 1))); do
            taskset -c "$(rcpus "$n")" "$LIMITS/udprecv" -p $((PORT + i)) -m recvmmsg -b 64 -R 16000000 \
                -t $((SECS + 3)) -i 1 >"$OUT/kr$i" 2>&1 &
            KR+=($!)
        done
        sleep 0.5
        KP=()
        for i in $(seq 0 $((n - 1))); do
            taskset -c "$i" "$LIMITS/udpsend" -a 127.0.0.1 -p $((PORT + i)) -s 64 -t "$SECS" -m sendmmsg -b 64 \
                >/dev/null 2>&1 &
            KP+=($!)
        done
        wait "${KP[@]}"
        wait "${KR[@]}"
        for i in $(seq 0 $((n - 1))); do kv "$OUT/kr$i" received; done |
            awk -v s="$SECS" '{ t += $1 } END { print t / s }' >>"$OUT/k"
    done
    t=$(mean <"$OUT/t") k=$(mean <"$OUT/k")
    printf "  %-3s %14.0f %14.0f %6sx   %s\n" "$n" "$t" "$k" "$(ratio "$t" "$k")" "[$per]"
done
