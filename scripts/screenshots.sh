#!/usr/bin/env bash
# Makes docs/exports.md's screenshots of the HTML report: traces
# testdata/demo/picture.c with --detail --html and photographs the page in
# headless chromium. Needs root (BPF), gcc and chromium.
#   sudo scripts/screenshots.sh [OUTDIR]   (default docs/images)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/images}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
go build -o "$work/memtrace" ./cmd/memtrace
go build -o "$work/htmlshot" ./internal/htmlreport/cmd/htmlshot
gcc -O2 -g -fno-omit-frame-pointer -o "$work/picture" testdata/demo/picture.c
# Real-BPF runs of several people on one host must not overlap.
(cd "$work" && flock /tmp/memtrace-bpf.lock ./memtrace --detail --html report.html -- ./picture >/dev/null)
"$work/htmlshot" -w 1200 -h 1850 "$work/report.html" "$out/html-report.png"
echo "wrote $out/html-report.png"
