#!/usr/bin/env bash
# What clearing accessed bits does to reclaim (docs/access.md): a program
# keeps a 64 MiB file mapped and reads it every 2 s (testdata/bench/
# warmfile.c) while `cat` streams a 1 GiB file, both in a memory cgroup
# limited to 128 MiB. Its major faults (warm pages reclaim took and it read
# back) are counted with no clearing and with each of $MODES written to its
# clear_refs every second: "1,4" clears every page's accessed bit, then
# flushes the TLB (clear_refs 4); "2,4" is what --access does (anonymous
# pages only). Needs root and cgroup v1's or v2's memory controller.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
secs=${SECS:-30}
dir=$(mktemp -d /var/tmp/access-reclaim.XXXXXX)
trap 'rm -rf "$dir"' EXIT
gcc -O2 -o "$dir/warmfile" "$here/../testdata/bench/warmfile.c"
dd if=/dev/urandom of="$dir/warm" bs=1M count=64 status=none
dd if=/dev/zero of="$dir/cold" bs=1M count=1024 status=none
sync "$dir/warm" "$dir/cold" # clean, so that they can be dropped from the page cache
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
	cg=/sys/fs/cgroup/access-reclaim-$$
	mkdir "$cg"
	echo $((${LIMIT_MIB:-128} << 20)) >"$cg/memory.high"
else
	cg=/sys/fs/cgroup/memory$(awk -F: '$2=="memory"{print $3}' /proc/self/cgroup)/access-reclaim-$$
	mkdir "$cg"
	echo $((${LIMIT_MIB:-128} << 20)) >"$cg/memory.limit_in_bytes"
fi
trap 'rmdir "$cg" 2>/dev/null; rm -rf "$dir"' EXIT
for mode in ${MODES:-none 1,4 2,4}; do
	# Both files out of the page cache first: each run's first pass reads
	# the warm file in (its first major faults, the same in every run).
	dd if="$dir/warm" iflag=nocache count=0 status=none
	dd if="$dir/cold" iflag=nocache count=0 status=none
	sh -c "echo \$\$ >$cg/cgroup.procs; exec $dir/warmfile $dir/warm $secs 2000" >"$dir/out" &
	warm=$!
	sh -c "echo \$\$ >$cg/cgroup.procs; while :; do cat $dir/cold >/dev/null; done" &
	stream=$!
	while kill -0 "$warm" 2>/dev/null; do
		if [ "$mode" != none ]; then
			for v in ${mode//,/ }; do
				echo "$v" >"/proc/$warm/clear_refs" 2>/dev/null || true
			done
		fi
		sleep 1
	done
	kill "$stream"
	wait "$stream" 2>/dev/null || true
	echo "clear_refs ${mode}: $(cat "$dir/out")"
done
