#!/bin/sh
# make bench-drops: what watching costs.
#
# 1. firehose drops beside a sink at max rate: `firehose sink` on 127.0.0.1 (CPU 0) under
#    `firehose flood` (CPU 1), the sink's socket overflowing (every overflow is a drop the
#    BPF program counts), without and with `firehose drops --prog-stats` watching; R
#    interleaved repetitions (off on off on ...) of D seconds. Prints the sink's pps per run,
#    the median (min-max) of each side, their ratio, the drops counted and the program's
#    nanoseconds per run and its whole run time as a share of one CPU over the watch (the
#    kernel's own BPF statistics: the watch's cost without the run-to-run noise of the pps,
#    which on loopback lands on the sender's CPU, where the softirq frees the skbs).
#    Target: with drops >= 95% of without.
# 2. firehose top at a 1 s refresh: the screen drawn into a pseudo-terminal (script(1)) for
#    T seconds; its user+system CPU over that time, as percent of one CPU. Target: <= 2%.
# Root (BPF). The load average is printed before and after.
set -eu
BIN=${BIN:-target/release/firehose}
R=${R:-3}
D=${D:-5}
T=${T:-30}
PORT=${PORT:-9190}
TMP=$(mktemp -d /tmp/fh-bench-observe.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$TMP"' EXIT INT TERM

median() { sort -n | awk '{v[NR]=$1} END {if (NR%2) m=v[(NR+1)/2]; else m=(v[NR/2]+v[NR/2+1])/2; printf "%.0f (%.0f-%.0f)", m, v[1], v[NR]}'; }

echo "load before: $(uptime)"
echo "firehose drops beside a sink at max rate: sink on CPU 0, flood on CPU 1, 127.0.0.1:$PORT, $R x $D s, interleaved"
for rep in $(seq "$R"); do
  for mode in off on; do
    if [ "$mode" = on ]; then
      "$BIN" drops --port "$PORT" --prog-stats -t $((D + 30)) --json-file "$TMP/drops-$rep.json" 2>"$TMP/drops.err" >/dev/null &
      dp=$!
      # The watch is attached once its first line is out.
      i=0; until [ -s "$TMP/drops.err" ] || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
    fi
    # The sink's own loss attribution is off: only the watch under test runs.
    "$BIN" sink --no-drops --listen "127.0.0.1:$PORT" --cpus 0 --duration "$D" --json-file "$TMP/sink-$mode-$rep.json" >/dev/null 2>&1 &
    sp=$!
    sleep 0.3
    "$BIN" flood --target "127.0.0.1:$PORT" --cpus 1 --duration "$D" >/dev/null 2>&1 || true
    wait "$sp"
    if [ "$mode" = on ]; then
      kill -INT "$dp"; wait "$dp" || true
      extra=$(jq -r '"watch: the socket'"'"'s drops \([.rows[] | select(.port_from == "socket") | .count] | add // 0) (\([.rows[] | select(.port_from == "socket") | "\(.reason) \(.count)"] | join(", "))), missed \(.missed), program \(.program.ns_per_run // 0 | floor) ns/run, \((.program.run_time_ns // 0) / 1e6 * 100 | floor / 100) ms in all = \((.program.run_time_ns // 0) / 1e9 / .seconds * 10000 | floor / 100)% of one CPU"' "$TMP/drops-$rep.json")
    else
      extra=""
    fi
    pps=$(jq -r '.pps | floor' "$TMP/sink-$mode-$rep.json")
    sd=$(jq -r '.socket_drops' "$TMP/sink-$mode-$rep.json")
    echo "$pps" >> "$TMP/pps-$mode"
    echo "  rep $rep drops $mode: sink $pps pps, socket drops $sd $extra"
  done
done
off=$(median < "$TMP/pps-off"); on=$(median < "$TMP/pps-on")
moff=$(sort -n "$TMP/pps-off" | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
mon=$(sort -n "$TMP/pps-on" | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
echo "sink pps without drops: $off"
echo "sink pps with drops:    $on"
echo "ratio (median with / without): $(awk -v a="$mon" -v b="$moff" 'BEGIN {printf "%.3f", a / b}') (target >= 0.95)"

echo "firehose top at a 1 s refresh, drawn into a pseudo-terminal for $T s"
ticks=$(getconf CLK_TCK)
script -qfc "$BIN top --interval 1 --duration $T" /dev/null >/dev/null 2>&1 &
sp=$!
sleep 1
tp=$(pgrep -n -f "$BIN top --interval 1" || true)
before=$(awk '{print $14 + $15}' "/proc/$tp/stat")
t0=$(date +%s.%N)
sleep $((T - 3))
after=$(awk '{print $14 + $15}' "/proc/$tp/stat")
t1=$(date +%s.%N)
wait "$sp" || true
echo "top: $(awk -v a="$after" -v b="$before" -v hz="$ticks" -v t0="$t0" -v t1="$t1" 'BEGIN {printf "%.2f%% of one CPU (%.2f s CPU in %.1f s)", (a - b) / hz / (t1 - t0) * 100, (a - b) / hz, t1 - t0}') (target <= 2%)"
echo "load after: $(uptime)"
