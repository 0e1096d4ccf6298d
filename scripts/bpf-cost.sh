#!/bin/sh
# bpf-cost.sh: what memtrace's BPF programs cost per malloc+free pair, for
# several memtrace binaries side by side. Each round runs every binary in
# turn on testdata/bench/mallocfree.c (PAIRS pairs, one thread) with
# kernel.bpf_stats_enabled on, and reads the per-program run time that
# memtrace -v logs at exit. Prints, per binary, the medians over ROUNDS of
# the BPF time per pair (all programs) and of the loop's ns per pair, then
# each program's runs per pair and ns per run.
#
# Usage: sudo scripts/bpf-cost.sh [-r ROUNDS] [-n PAIRS] [-a 'MEMTRACE ARGS'] BIN...
#   e.g. scripts/bpf-cost.sh -a '--sample-bytes 512K' bin/memtrace /tmp/memtrace-before
# Needs root, gcc and g++'s libstdc++ (the fixture links it).
set -eu
rounds=5 pairs=300000 args=
while getopts r:n:a: o; do
	case $o in
	r) rounds=$OPTARG ;;
	n) pairs=$OPTARG ;;
	a) args=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { echo "usage: bpf-cost.sh [-r ROUNDS] [-n PAIRS] [-a ARGS] BIN..." >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bpf-cost: memtrace needs root; run with sudo" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
stats=$(cat /proc/sys/kernel/bpf_stats_enabled)
trap 'echo "$stats" >/proc/sys/kernel/bpf_stats_enabled; rm -rf "$tmp"' EXIT
echo 1 >/proc/sys/kernel/bpf_stats_enabled
gcc -O2 -o "$tmp/mallocfree" "$root/testdata/bench/mallocfree.c" -pthread -lstdc++

i=0
while [ "$i" -lt "$rounds" ]; do
	for b in "$@"; do
		# shellcheck disable=SC2086 # args are memtrace's flags, split on purpose
		"$b" -v $args -o /dev/null -- "$tmp/mallocfree" "$pairs" 2>&1 |
			awk -v b="$b" -v n="$pairs" '
			/ns_per_pair=/ { for (i = 1; i <= NF; i++) if ($i ~ /^ns_per_pair=/) print b, "pair", substr($i, 13) }
			/msg="bpf program"/ {
				for (i = 1; i <= NF; i++) {
					if ($i ~ /^name=/) nm = substr($i, 6)
					if ($i ~ /^runs=/) r = substr($i, 6)
					if ($i ~ /^run_ns=/) t = substr($i, 8)
				}
				if (r > 0) print b, nm, r / n, t / r
			}' >>"$tmp/runs"
	done
	i=$((i + 1))
done
# The median of column 3 (and of 4, when there) per binary and key; the
# BPF time per pair is the sum over programs of runs/pair x ns/run.
for b in "$@"; do
	for k in pair $(awk -v b="$b" '$1 == b && $2 != "pair" { print $2 }' "$tmp/runs" | sort -u); do
		awk -v b="$b" -v k="$k" '$1 == b && $2 == k' "$tmp/runs" >"$tmp/sel"
		m3=$(awk '{ print $3 }' "$tmp/sel" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
		m4=$(awk 'NF > 3 { print $4 }' "$tmp/sel" | sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }')
		printf '%s\t%s\t%s\t%s\n' "$b" "$k" "$m3" "$m4"
	done
done >"$tmp/med"
awk -F'\t' '
	$2 == "pair" { pair[$1] = $3 }
	$2 != "pair" { prog[$1] = prog[$1] sprintf(" %s %.2fx%.0f", $2, $3, $4); tot[$1] += $3 * $4 }
	{ if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
	END {
		printf "%-40s %14s %14s  %s\n", "binary", "BPF ns/pair", "loop ns/pair", "programs (runs/pair x ns/run, medians)"
		for (i = 1; i <= n; i++) { b = order[i]; printf "%-40s %14.1f %14.1f %s\n", b, tot[b], pair[b], prog[b] }
	}' "$tmp/med"
