#!/bin/sh
# compare-heaptrack.sh: run Debian's sqlite3 on testdata/sqlite/workload.sql
# under memtrace and under heaptrack and print their figures side by side.
# See docs/heaptrack-comparison.md for what each difference means.
#
# Usage: sudo scripts/compare-heaptrack.sh [WORKLOAD.sql]
#
# Needs root (memtrace's probes), Go, and the Debian packages sqlite3 and
# heaptrack (zstd is optional: without it heaptrack writes .gz files).
# Installs nothing.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
workload=$(readlink -f "${1:-$root/testdata/sqlite/workload.sql}")

missing=
for tool in sqlite3:sqlite3 heaptrack:heaptrack heaptrack_print:heaptrack awk:mawk; do
	command -v "${tool%%:*}" >/dev/null 2>&1 && continue
	case "$missing " in *" ${tool#*:} "*) ;; *) missing="$missing ${tool#*:}" ;; esac
done
if [ -n "$missing" ]; then
	echo "compare-heaptrack: missing Debian packages:$missing" >&2
	echo "  install them with: apt-get install$missing" >&2
	exit 2
fi
command -v go >/dev/null 2>&1 || { echo "compare-heaptrack: go is not in PATH" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "compare-heaptrack: memtrace needs root; run with sudo" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sqlite=$(command -v sqlite3)

echo "building memtrace..." >&2
(cd "$root" && go build -o "$tmp/memtrace" ./cmd/memtrace)

# heaptrack's preload library loads libstdc++, whose initialiser allocates
# an exception pool the plain program never has: memtrace runs both ways.
libstdcxx=$(g++ -print-file-name=libstdc++.so.6 2>/dev/null || echo /usr/lib/x86_64-linux-gnu/libstdc++.so.6)
echo "memtrace: $sqlite -batch :memory: \".read $workload\"" >&2
"$tmp/memtrace" --json --top 0 -o "$tmp/memtrace.ndjson" -- \
	"$sqlite" -batch :memory: ".read '$workload'" >"$tmp/memtrace.out"
echo "memtrace: the same with LD_PRELOAD=$libstdcxx" >&2
"$tmp/memtrace" --json --top 0 -o "$tmp/memtrace-pre.ndjson" -- \
	/usr/bin/env LD_PRELOAD="$libstdcxx" "$sqlite" -batch :memory: ".read '$workload'" >/dev/null

echo "heaptrack: $sqlite -batch :memory: \".read $workload\"" >&2
(cd "$tmp" && heaptrack -o "$tmp/heaptrack" "$sqlite" -batch :memory: ".read '$workload'") >"$tmp/heaptrack.out" 2>&1 ||
	{ cat "$tmp/heaptrack.out" >&2; exit 1; }
data=$(ls "$tmp"/heaptrack.zst "$tmp"/heaptrack.gz 2>/dev/null | head -n 1)
[ -n "$data" ] || { echo "compare-heaptrack: heaptrack wrote no data file" >&2; cat "$tmp/heaptrack.out" >&2; exit 1; }
case $data in
*.zst) zstd -dc "$data" >"$tmp/heaptrack.txt" ;;
*) gzip -dc "$data" >"$tmp/heaptrack.txt" ;;
esac
heaptrack_print -a 0 -p 0 -T 0 -l 0 "$data" >"$tmp/print.txt"

# Exact totals of heaptrack's event stream (hex numbers): "a SIZE TRACE"
# defines allocation info k (from 0), "+ k" / "- k" allocate / free a block
# of it. A realloc is "- old" then "+ new".
ht=$(awk '
function hex(s,   i, v) { v = 0; s = tolower(s); for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1; return v }
BEGIN { infos = 0 }
{ split($0, f, " ") }
f[1] == "a" { size[infos++] = hex(f[2]); next }
f[1] == "+" { k = hex(f[2]); allocs++; bytes += size[k]; live += size[k]; lives++; if (live > peak) peak = live; next }
f[1] == "-" { k = hex(f[2]); frees++; live -= size[k]; lives--; next }
END { printf "%.0f %.0f %.0f %.0f %.0f %.0f\n", allocs, bytes, frees, peak, live, lives }
' "$tmp/heaptrack.txt")
[ -n "$ht" ] || { echo "compare-heaptrack: could not read $data" >&2; exit 1; }
set -- $ht
h_allocs=$1 h_bytes=$2 h_frees=$3 h_peak=$4 h_live=$5 h_lives=$6

# The final process record's top-level fields (the "mmap" object repeats some names).
field() { grep '"type":"process"' "$2" | grep '"final":true' | sed 's/"mmap".*//' |
	sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" | head -n 1; }
m=$tmp/memtrace.ndjson p=$tmp/memtrace-pre.ndjson
m_allocs=$(field allocs "$m") m_bytes=$(field alloc_bytes "$m") m_frees=$(field frees "$m")
m_peak=$(field peak_live_bytes "$m") m_live=$(field live_bytes "$m") m_lives=$(field live_allocs "$m")
m_lost=$(($(field lost_events "$m") + $(field lost_events "$p")))
q_allocs=$(field allocs "$p") q_bytes=$(field alloc_bytes "$p") q_frees=$(field frees "$p")
q_peak=$(field peak_live_bytes "$p") q_live=$(field live_bytes "$p") q_lives=$(field live_allocs "$p")
[ -n "$m_allocs" ] || { echo "compare-heaptrack: no final process record from memtrace" >&2; exit 1; }

printed() { sed -n "s/^$1: \([^ ]*\).*/\1/p" "$tmp/print.txt" | head -n 1; }
p_peak=$(printed 'peak heap memory consumption') p_leaked=$(printed 'total memory leaked')
p_supp=$(printed 'suppressed leaks') p_calls=$(printed 'calls to allocation functions')

echo
echo "sqlite3 $(sqlite3 -version | cut -d' ' -f1), $(heaptrack --version 2>&1 | head -n 1), workload $(basename "$workload")"
printf '%-22s | %12s | %18s | %12s\n' metric memtrace "memtrace+libstdc++" heaptrack
printf '%-22s-|-%12s-|-%18s-|-%12s\n' ---------------------- ------------ ------------------ ------------
row() { printf '%-22s | %12s | %18s | %12s\n' "$1" "$2" "$3" "$4"; }
row "allocation calls" "$m_allocs" "$q_allocs" "$h_allocs"
row "bytes allocated" "$m_bytes" "$q_bytes" "$h_bytes"
row "frees" "$m_frees" "$q_frees" "$h_frees"
row "peak live bytes" "$m_peak" "$q_peak" "$h_peak"
row "live bytes at exit" "$m_live" "$q_live" "$h_live"
row "live blocks at exit" "$m_lives" "$q_lives" "$h_lives"
echo
echo "heaptrack_print says: calls to allocation functions: $p_calls, peak heap memory consumption: $p_peak,"
echo "  total memory leaked: $p_leaked, suppressed leaks: ${p_supp:-0B} (units of 1000 bytes; leaked excludes suppressed)"
echo "memtrace+libstdc++: sqlite3 with libstdc++ preloaded, as heaptrack's own library loads it; heaptrack"
echo "  frees libstdc++'s pool in its atexit handler (__gnu_cxx::__freeres): one more free, one less live block"
[ "$m_lost" = 0 ] || echo "WARNING: memtrace lost $m_lost events; its figures are incomplete"
if ! grep -qF "$(cat "$tmp/memtrace.out")" "$tmp/heaptrack.out"; then
	echo "WARNING: sqlite3 printed different results under the two tools"
fi
