#!/usr/bin/env bash
# Fails when a tracked file other than the generated BPF objects exceeds
# 1 MB: a kernel package (107 MB) and a binary (11 MB) were once committed
# by mistake, and a clone carries them for ever. Run by .ci/run; run it
# before committing large test data.
set -euo pipefail
cd "$(dirname "$0")/.."

limit=$((1000 * 1000))
status=0
while IFS= read -r -d '' path; do
	case "$path" in
	internal/tracer/*_bpfel.o | internal/tracer/*/*_bpfel.o) continue ;; # bpf2go's output, committed on purpose
	esac
	[ -f "$path" ] || continue # deleted in the work tree
	size=$(stat -c %s -- "$path")
	if [ "$size" -gt "$limit" ]; then
		echo "check-large-files: $path is $size bytes (more than 1 MB): keep it out of git" >&2
		status=1
	fi
done < <(git ls-files -z)
exit "$status"
