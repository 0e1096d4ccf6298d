#!/bin/sh
# chain-cost.sh: what the charging walk costs by the length of the chain
# it follows. Traces testdata/unwinding/chaincost.c (linked with the
# stripped wraplib.c) under memtrace in three ways: malloc called from named
# code, through xmalloc (charged 2 frames up) and through deep_alloc's ten
# unnamed steps (charged 12 frames up). Prints, per way, the median over
# ROUNDS alternating runs of the CPU time per malloc+free pair, and its
# ratio to the named way.
#
# Usage: sudo scripts/chain-cost.sh [ROUNDS [PAIRS]]   (default 11 100000)
# Needs root (memtrace's probes), Go, gcc and strip.
set -eu
rounds=${1:-11}
pairs=${2:-100000}
root=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" = 0 ] || { echo "chain-cost: memtrace needs root; run with sudo" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

(cd "$root" && CGO_ENABLED=0 go build -o "$tmp/memtrace" ./cmd/memtrace)
gcc -O2 -g -shared -fPIC -o "$tmp/libwrapfull.so" "$root/testdata/unwinding/wraplib.c"
strip --strip-unneeded -o "$tmp/libwrap.so" "$tmp/libwrapfull.so"
gcc -O2 -o "$tmp/chaincost" "$root/testdata/unwinding/chaincost.c" -L"$tmp" -lwrap -Wl,-rpath,"$tmp"

i=0
while [ "$i" -lt "$rounds" ]; do
	for mode in named wrapper deep; do
		printf '%s %s\n' "$mode" "$("$tmp/memtrace" --top 1 -o /dev/null -- "$tmp/chaincost" "$pairs" "$mode")"
	done >>"$tmp/runs"
	i=$((i + 1))
done
for mode in named wrapper deep; do
	awk -v m="$mode" '$1 == m { print $2 }' "$tmp/runs" | sort -n |
		awk -v m="$mode" '{ v[NR] = $1 } END { print m, v[int((NR + 1) / 2)] }'
done | awk '{ if (NR == 1) base = $2; printf "%-8s %8.1f ns/pair  %.2fx\n", $1, $2, $2 / base }'
