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
for tool in sqlite3:sqlite3 heaptrack:heaptrack heaptrack_print:heaptrack ldd:libc-bin awk:mawk; do
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

echo "memtrace: $sqlite -batch :memory: \".read $workload\"" >&2
"$tmp/memtrace" --json --top 0 -o "$tmp/memtrace.ndjson" -- \
	"$sqlite" -batch :memory: ".read '$workload'" >"$tmp/memtrace.out"

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

# Libraries sqlite3 loads by itself, symlinks resolved; any other library in
# heaptrack's data (libstdc++, libunwind, ...) is there only because
# heaptrack's LD_PRELOAD library needs it.
{ readlink -f "$sqlite"; ldd "$sqlite" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }' | xargs readlink -f; } >"$tmp/own.txt"
# heaptrack's string table: "s LEN STRING" (file format 3) or "s STRING".
awk '$1 == "v" { fmt = $3 + 0 } $1 == "s" { n++; s = substr($0, 3); if (fmt >= 3) s = substr(s, index(s, " ") + 1); if (s ~ /^\//) print n "\t" s }' \
	"$tmp/heaptrack.txt" | while IFS="$(printf '\t')" read -r n path; do
	if ! grep -qxF "$(readlink -f "$path" 2>/dev/null || echo "$path")" "$tmp/own.txt"; then
		printf '%s\t%s\n' "$n" "$path"
	fi
done >"$tmp/foreign.txt"

# Totals of heaptrack's event stream (hex numbers): "a SIZE TRACE" defines
# allocation info k (from 0), "+ k" / "- k" allocate / free a block of it,
# "t IP PARENT" and "i IP MODULE ..." lead from a trace to the module of the
# allocator's caller. A realloc is "- old" then "+ new". "x" figures leave out
# the blocks allocated from a library in foreign.txt, peak recomputed.
ht=$(awk -F '\t' -v usedfile="$tmp/used.txt" '
function hex(s,   i, v) { v = 0; s = tolower(s); for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1; return v }
BEGIN { infos = 0 }
FILENAME == ARGV[1] { foreign[$1] = 1; next }
{ split($0, f, " ") }
f[1] == "i" { ips++; ipmod[ips] = hex(f[3]); next }
f[1] == "t" { traces++; traceip[traces] = hex(f[2]); next }
f[1] == "a" { size[infos] = hex(f[2]); mod[infos] = ipmod[traceip[hex(f[3])]]; ext[infos] = (mod[infos] in foreign); infos++; next }
f[1] == "+" { k = hex(f[2]); allocs++; bytes += size[k]; live += size[k]; lives++; if (live > peak) peak = live
	if (ext[k]) { eallocs++; ebytes += size[k]; elive += size[k]; elives++; used[mod[k]] = 1 } else { xlive += size[k]; if (xlive > xpeak) xpeak = xlive }
	next }
f[1] == "-" { k = hex(f[2]); frees++; live -= size[k]; lives--
	if (ext[k]) { efrees++; elive -= size[k]; elives-- } else xlive -= size[k]
	next }
END { printf "%.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f\n", allocs, bytes, frees, peak, live, lives, eallocs, ebytes, efrees, peak - xpeak, elive, elives
	for (m in used) print m >usedfile }
' "$tmp/foreign.txt" "$tmp/heaptrack.txt")
[ -n "$ht" ] || { echo "compare-heaptrack: could not read $data" >&2; exit 1; }
set -- $ht
h_allocs=$1 h_bytes=$2 h_frees=$3 h_peak=$4 h_live=$5 h_lives=$6
e_allocs=$7 e_bytes=$8 e_frees=$9 e_peak=${10} e_live=${11} e_lives=${12}

# The final process record's top-level fields (the "mmap" object repeats some names).
field() { grep '"type":"process"' "$tmp/memtrace.ndjson" | grep '"final":true' | sed 's/"mmap".*//' |
	sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" | head -n 1; }
m_allocs=$(field allocs) m_bytes=$(field alloc_bytes) m_frees=$(field frees)
m_peak=$(field peak_live_bytes) m_live=$(field live_bytes) m_lives=$(field live_allocs)
m_lost=$(field lost_events)
[ -n "$m_allocs" ] || { echo "compare-heaptrack: no final process record from memtrace" >&2; exit 1; }

printed() { sed -n "s/^$1: \([^ ]*\).*/\1/p" "$tmp/print.txt" | head -n 1; }
p_peak=$(printed 'peak heap memory consumption') p_leaked=$(printed 'total memory leaked')
p_supp=$(printed 'suppressed leaks') p_calls=$(printed 'calls to allocation functions')

echo
echo "sqlite3 $(sqlite3 -version | cut -d' ' -f1), $(heaptrack --version 2>&1 | head -n 1), workload $(basename "$workload")"
printf '%-22s | %12s | %12s | %10s | %s\n' metric memtrace heaptrack difference "difference without heaptrack-only blocks"
printf '%-22s-|-%12s-|-%12s-|-%10s-|-%s\n' ---------------------- ------------ ------------ ---------- ----------------------------------------
row() { printf '%-22s | %12s | %12s | %10s | %s\n' "$1" "$2" "$3" "$(($2 - $3))" "$(($2 - ($3 - $4)))"; }
row "allocation calls" "$m_allocs" "$h_allocs" "$e_allocs"
row "bytes allocated" "$m_bytes" "$h_bytes" "$e_bytes"
row "frees" "$m_frees" "$h_frees" "$e_frees"
row "peak live bytes" "$m_peak" "$h_peak" "$e_peak"
row "live bytes at exit" "$m_live" "$h_live" "$e_live"
row "live blocks at exit" "$m_lives" "$h_lives" "$e_lives"
echo
echo "heaptrack_print says: calls to allocation functions: $p_calls, peak heap memory consumption: $p_peak,"
echo "  total memory leaked: $p_leaked, suppressed leaks: ${p_supp:-0B} (units of 1000 bytes; leaked excludes suppressed)"
if [ "$e_allocs" != 0 ]; then
	echo "heaptrack-only blocks: $e_allocs allocation(s), $e_bytes bytes, $e_live bytes live at exit, allocated from"
	echo "  $(awk -F '\t' 'NR == FNR { used[$1] = 1; next } $1 in used { printf "%s%s", sep, $2; sep = " " }' "$tmp/used.txt" "$tmp/foreign.txt")"
	echo "  which only heaptrack's LD_PRELOAD library loads"
fi
[ "$m_lost" = 0 ] || echo "WARNING: memtrace lost $m_lost events; its figures are incomplete"
if ! grep -qF "$(cat "$tmp/memtrace.out")" "$tmp/heaptrack.out"; then
	echo "WARNING: sqlite3 printed different results under the two tools"
fi
