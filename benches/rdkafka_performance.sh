#!/usr/bin/env bash
# librdkafka's own load generator, rdkafka_performance (the examples/ of the librdkafka that
# rdkafka-sys bundles), against `nanokafka serve` and tansu in the same run: for each
# partition count, each broker fresh (serve: the release build on a new temp data directory,
# default settings; tansu: in memory), a topic of that many partitions, RECORDS records of
# 100 B produced with acks=all (-a -1), then consumed from the beginning of every partition.
#
#   benches/rdkafka_performance.sh          # a Markdown table: each broker's rates and CPU, and the ratios
#
# Environment (all optional): NANOKAFKA_PERF_RECORDS (default 2000000), NANOKAFKA_PERF_PARTITIONS
# (default "1 4"), NANOKAFKA_BIN (a built `nanokafka`; else `cargo build --release --bin
# nanokafka`), NANOKAFKA_TANSU (tansu's binary; else benches/peers/tansu.sh path),
# NANOKAFKA_LIBRDKAFKA_CACHE (where compat/librdkafka/run builds librdkafka; default
# ~/.cache/nanokafka/librdkafka-VERSION).
#
# Each figure is rdkafka_performance's own: produce from the first produce call until the
# last delivery report (its final line), consume from the first record to the last. The
# broker's CPU is utime + stime from /proc/<pid>/stat before and after each phase, per million
# records. rdkafka_performance is built once (make, in the librdkafka tree compat/librdkafka/run
# builds; about 2 s) next to the suite's test-runner.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/.."

records="${NANOKAFKA_PERF_RECORDS:-2000000}"
read -r -a partition_counts <<<"${NANOKAFKA_PERF_PARTITIONS:-1 4}"
record_bytes=100
# Longest one phase may take before the run is abandoned as hung.
phase_timeout=300

# --- rdkafka_performance: built once in the librdkafka tree of compat/librdkafka/run ---------

version="$(cargo metadata --format-version 1 --features kafka |
    python3 -c 'import json, sys
print(next(p for p in json.load(sys.stdin)["packages"] if p["name"] == "rdkafka-sys")["version"].split("+")[1])')"
cache="${NANOKAFKA_LIBRDKAFKA_CACHE:-$HOME/.cache/nanokafka/librdkafka-$version}"
perf="$cache/examples/rdkafka_performance"
if [ ! -x "$perf" ]; then
    if [ ! -f "$cache/src/librdkafka.a" ]; then
        echo "librdkafka $version is not built in $cache: run compat/librdkafka/run once (it builds it)" >&2
        exit 1
    fi
    echo "== building rdkafka_performance in $cache/examples (once)" >&2
    make -s -C "$cache/examples" rdkafka_performance >&2
fi

# --- The brokers ------------------------------------------------------------------------------

if [ -n "${NANOKAFKA_BIN:-}" ]; then
    nanokafka="$NANOKAFKA_BIN"
else
    cargo build --quiet --release --bin nanokafka
    target_dir="$(cargo metadata --no-deps --format-version 1 |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
    nanokafka="$target_dir/release/nanokafka"
fi
tansu="${NANOKAFKA_TANSU:-$(benches/peers/tansu.sh path 2>/dev/null || true)}"
if [ ! -x "$tansu" ]; then
    echo "tansu is not installed (benches/peers/tansu.sh install, or NANOKAFKA_TANSU)" >&2
    exit 1
fi

work="$(mktemp -d)"
broker_pid=
# Stops the broker; serve's data directory goes with it, so that its page cache is freed as
# tansu's memory is when it exits.
stop_broker() {
    if [ -n "$broker_pid" ]; then
        kill "$broker_pid" 2>/dev/null || true
        wait "$broker_pid" 2>/dev/null || true
        broker_pid=
    fi
    rm -rf "$work/data"
}
trap 'stop_broker; rm -rf "$work"' EXIT

# Waits up to 30 s for a line matching $2 in file $1.
wait_for_line() {
    for _ in $(seq 300); do
        grep -qs "$2" "$1" && return 0
        sleep 0.1
    done
    echo "no '$2' in $1:" >&2
    cat "$1" >&2
    return 1
}

# Starts broker $1 (serve or tansu) afresh; sets broker_pid and broker_addr.
start_broker() {
    local log="$work/$1.log"
    case "$1" in
    serve)
        "$nanokafka" serve --data-dir "$work/data" --listen 127.0.0.1:0 2>"$log" &
        broker_pid=$!
        wait_for_line "$log" 'listening on '
        broker_addr="$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$log" | head -n 1)"
        ;;
    tansu)
        local port
        port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
        "$tansu" broker --listener-url "tcp://127.0.0.1:$port" \
            --advertised-listener-url "tcp://127.0.0.1:$port" \
            --storage-engine memory://tansu/ >"$log" 2>&1 &
        broker_pid=$!
        wait_for_line "$log" 'ready in'
        broker_addr="127.0.0.1:$port"
        ;;
    esac
}

# The broker's CPU time so far, in clock ticks (utime + stime; fields 14 and 15 of stat,
# counted after the command name, which may hold spaces).
cpu_ticks() {
    awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$broker_pid/stat"
}
ticks_per_sec="$(getconf CLK_TCK)"

# Runs one rdkafka_performance phase ($1: produce or consume) against the running broker
# on topic $2 with $3 partitions; prints "records_per_sec mb_per_sec broker_cpu client_cpu",
# each CPU in seconds per million records.
phase() {
    local mode="$1" topic="$2" count="$3" out="$work/$1.out" before after
    local -a args=(-b "$broker_addr" -t "$topic" -c "$records" -q)
    case "$mode" in
    produce) args+=(-P -s "$record_bytes" -a -1) ;;
    consume)
        args+=(-C -o beginning -e)
        for ((p = 0; p < count; p++)); do args+=(-p "$p"); done
        ;;
    esac
    before="$(cpu_ticks)"
    if ! /usr/bin/time -o "$work/client-cpu" -f '%U %S' \
        timeout "$phase_timeout" "$perf" "${args[@]}" >"$out" 2>&1; then
        echo "rdkafka_performance $mode against $broker_addr failed:" >&2
        tail -n 20 "$out" >&2
        return 1
    fi
    after="$(cpu_ticks)"
    # produce: "... in 1727ms: 115741 msgs/s and 11.57 MB/s, ..."
    # consume: "... consumed in 421ms: 474600 msgs/s (47.46 MB/s)"
    python3 - "$out" "$mode" "$records" "$((after - before))" "$ticks_per_sec" "$work/client-cpu" <<'EOF'
import re, sys
text, mode, records, ticks, per_sec = open(sys.argv[1]).read(), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
client = sum(float(f) for f in open(sys.argv[6]).read().split()[-2:])
pattern = {"produce": r"(\d+) messages produced .* (\d+) delivered \(.*, (\d+) failed\) in \d+ms: (\d+) msgs/s and ([\d.]+) MB/s",
           "consume": r"(\d+) messages \(\d+ bytes\) consumed in \d+ms: (\d+) msgs/s \(([\d.]+) MB/s\)"}[mode]
found = re.findall(pattern, text)
if not found:
    sys.exit(f"no final figures in rdkafka_performance's output:\n{text[-2000:]}")
last = found[-1]
if mode == "produce":
    produced, delivered, failed, rate, mb = last
    if int(delivered) != records or int(failed) != 0:
        sys.exit(f"{delivered} of {records} delivered, {failed} failed")
else:
    consumed, rate, mb = last
    if int(consumed) != records:
        sys.exit(f"{consumed} of {records} consumed")
print(rate, mb, f"{ticks / per_sec / (records / 1e6):.3f}", f"{client / (records / 1e6):.3f}")
EOF
}

# --- The run ------------------------------------------------------------------------------------

declare -A figures
# The first broker of each partition count alternates: the first to grow its memory (serve's
# page cache, tansu's heap) after a while may find it slower to get (a VM's host takes back
# free memory), the second reuses what the first freed.
order=(serve tansu)
for partitions in "${partition_counts[@]}"; do
    for broker in "${order[@]}"; do
        start_broker "$broker"
        topic="perf-$partitions"
        "$tansu" topic create --broker "tcp://$broker_addr" --partitions "$partitions" "$topic" \
            >"$work/create.out" 2>&1 || { cat "$work/create.out" >&2; exit 1; }
        for mode in produce consume; do
            echo "== $broker, $partitions partition(s): $mode $records x $record_bytes B" >&2
            figures[$broker,$partitions,$mode]="$(phase "$mode" "$topic" "$partitions")"
            echo "   ${figures[$broker,$partitions,$mode]}  (records/s, MB/s; CPU s per M records: broker, client)" >&2
        done
        stop_broker
    done
    order=("${order[1]}" "${order[0]}")
done

echo "| partitions | phase | serve rec/s (MB/s) | tansu rec/s (MB/s) | rate serve/tansu | serve CPU s/M rec | tansu CPU s/M rec | CPU serve/tansu |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for partitions in "${partition_counts[@]}"; do
    for mode in produce consume; do
        read -r sr smb scpu _ <<<"${figures[serve,$partitions,$mode]}"
        read -r tr tmb tcpu _ <<<"${figures[tansu,$partitions,$mode]}"
        python3 -c '
import sys
p, mode, sr, smb, scpu, tr, tmb, tcpu = sys.argv[1:]
ratio = lambda a, b: f"{float(a) / float(b):.2f}x" if float(b) > 0 else "n/a"
print(f"| {p} | {mode} | {int(sr):,} ({smb}) | {int(tr):,} ({tmb}) | {ratio(sr, tr)} | {scpu} | {tcpu} | {ratio(scpu, tcpu)} |")
' "$partitions" "$mode" "$sr" "$smb" "$scpu" "$tr" "$tmb" "$tcpu"
    done
done
