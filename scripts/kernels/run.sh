#!/usr/bin/env bash
# make test-kernels: boot each kernel listed in scripts/kernels/kernels (or
# given as arguments: Debian package names) in qemu, without KVM (TCG), and
# run the real-BPF tests named in $E2E_TESTS and $TRACER_TESTS inside it,
# as root with CI=true (nothing may skip). The guest sees the host's / read-
# only over 9p (with a tmpfs overlay), so gcc, the fixtures and this checkout
# are there; the test binaries are built here first. Prints which tests
# passed on which kernel; exits non-zero if any failed or a kernel did not
# report.
#
# Needs root, qemu-system-x86, busybox-static, cpio, kmod, xz-utils (the
# CI script installs them) and apt access to Debian's kernel packages.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${MEMTRACE_KERNELS_CACHE:-/var/cache/memtrace-kernels}
out=${MEMTRACE_KERNELS_OUT:-$repo/bin/kernels}
# Per kernel, the whole run (boot, tests, power-off) must end within this.
# The list below took 724 s on 6.12 on a loaded machine here (TCG), with
# the footprint and resident tests added: 1200 s leaves room.
limit=${MEMTRACE_KERNELS_TIMEOUT:-1200}
# A subset of the end-to-end tests that covers every mode: `--` with exact
# figures (every allocator function, static, jemalloc, a preload through
# exec, wrappers, dlopen, exit status), -p, the leak check, --detail, whole
# host (a new libc in a chroot, cgroup and comm filters, exits), sampling,
# bad input, the refusal of a kernel, the per-probe path against
# uprobe_multi, resident attribution (page faults; before 6.2 the walk runs
# at the fault itself, bpf/resident.h), its release and huge pages (on
# 6.1 in two pieces: the fault's first page, then the rest), access
# statistics (soft-dirty's written bytes on 6.1 and 6.12). Left out, as they measure the machine more than the
# kernel under TCG on a busy host: TestThreads (1.6 M events at full
# speed: the starved reader loses some), TestHostPicksUpNewProcesses (its
# short-lived process is gone before memtrace reads its mappings), and
# TestFollowForks (-f; the slowest, a minute per guest). TestUnwindChains
# is in: its fixture calls into the dlopen'ed plugin only once memtrace -v
# says the plugin's unwind table is in, however slowly TCG builds it.
E2E_TESTS=${E2E_TESTS:-'^(TestLeaksExact|TestAttachRunning|TestCommandStatus|TestWrappers|TestDlopenUnloaded|TestDetailStacks|TestUnwindChains|TestWrapperRules|TestExceptionsUnchanged|TestWrappersOnOverlay|TestFailOnLeak|TestLeakCheckAttached|TestLeakCheckThreadStacks|TestSampledEstimates|TestSampledAttachPaths|TestSessionUnderAnotherTracer|TestMapsAfterSkippedReturn|TestSampledAlignedCounts|TestSampledForgottenBlocks|TestSampledFilterCount|TestSampledFailedCalls|TestHostCgroup|TestBadInput|TestKernelRefused|TestPerProbeSameFigures|TestFootprintFixtures|TestResidentCommand|TestResidentReleased|TestResidentHugePages|TestResidentRefault|TestResidentMoved|TestResidentExecve|TestResidentGoChurn|TestResidentGo|TestAccessFixture|TestPythonLines|TestPythonCodeReused)$'}
# One host thread runs both vCPUs (single-threaded TCG). With a thread per
# vCPU (MTTCG, qemu's default) 6.12 guests often panicked in the kernel's
# own text patching: a vCPU ran a half-patched jump label (an int3, or the
# middle of a jmp, in __schedule, finish_task_switch, __alloc_pages) while
# the other switched a static key; single-threaded TCG makes cross-vCPU
# code changes coherent. The two guests boot side by side, so each gets
# about one of a two-core host's cores either way: the matrix took as long.
accel=${MEMTRACE_KERNELS_ACCEL:-tcg,thread=single}
# Runs of each e2e test: more than one to chase a flaky test in a guest.
E2E_COUNT=${E2E_COUNT:-1}
# Runs of BenchmarkAttach per attach path.
BENCH_RUNS=${BENCH_RUNS:-3}
TRACER_TESTS=${TRACER_TESTS:-'^(TestFeatures|TestLoadPerProbe|TestDetachStale|TestLoadModes|TestRecordLayout|TestExpDraw|TestSampleDecision|TestRefaultSlot|TestRefaultBits|TestExecProgram)$'}

if [ "$(id -u)" != 0 ]; then
	echo "test-kernels: needs root (apt-get, and BPF inside the guests)" >&2
	exit 1
fi
for tool in qemu-system-x86_64 cpio modinfo xz dpkg apt-get; do
	command -v "$tool" >/dev/null || { echo "test-kernels: $tool missing (apt-get install -y qemu-system-x86 busybox-static cpio kmod xz-utils)" >&2; exit 1; }
done
if ! [ -x /bin/busybox ] || ldd /bin/busybox >/dev/null 2>&1; then
	echo "test-kernels: /bin/busybox must be static (apt-get install -y busybox-static)" >&2
	exit 1
fi

if [ $# -gt 0 ]; then
	packages=("$@")
else
	mapfile -t packages < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' -e 's/[[:space:]]//g' "$here/kernels")
fi

# image resolves a metapackage to the linux-image package it depends on.
image() {
	local dep
	dep=$(apt-cache depends "$1" 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
	echo "${dep:-$1}"
}

# modules_for prints the modules to load, dependencies first.
modules_for() {
	local tree=$1; shift
	local -A seen=()
	visit() {
		local m=$1 f dep
		[ -n "${seen[$m]:-}" ] && return
		seen[$m]=1
		f=$(find "$tree" -name "$m.ko" -o -name "$m.ko.xz" | head -1)
		[ -z "$f" ] && return # built in
		for dep in $(modinfo -F depends "$f" | tr ',' ' '); do visit "$dep"; done
		echo "$m $f"
	}
	for m in "$@"; do visit "$m"; done
}

# prepare downloads and unpacks a kernel package once, keeping its vmlinuz
# and the modules the guest needs, then builds its initramfs (every time,
# so that a changed init is used): $cache/$pkg/{vmlinuz,initrd.gz}.
prepare() {
	local pkg=$1 dir=$cache/$1
	if ! [ -s "$dir/vmlinuz" ]; then
		rm -rf "$dir" && mkdir -p "$dir/deb" "$dir/root/bin" "$dir/root/lib/modules"
		(cd "$dir/deb" && apt-get download -q "$pkg" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
		dpkg -x "$dir"/deb/*.deb "$dir/x"
		local m f
		modules_for "$dir/x/lib/modules" virtio_pci 9pnet_virtio 9p overlay |
			while read -r m f; do
				case $f in
				*.xz) xz -dc "$f" >"$dir/root/lib/modules/$m.ko" ;;
				*) cp "$f" "$dir/root/lib/modules/$m.ko" ;;
				esac
				echo "$m" >>"$dir/root/modules.order"
			done
		cp "$dir"/x/boot/vmlinuz-* "$dir/vmlinuz.part"
		rm -rf "$dir/deb" "$dir/x"
		mv "$dir/vmlinuz.part" "$dir/vmlinuz"
	fi
	cp /bin/busybox "$dir/root/bin/busybox"
	cp "$here/init" "$dir/root/init"
	(cd "$dir/root" && find . | cpio -o -H newc --quiet | gzip -1 >"$dir/initrd.gz")
}

# guest_script writes what the guest runs, as root, with CI=true.
guest_script() {
	local res=$1
	cat >"$res/guest.sh" <<EOF
#!/bin/bash
export CI=true HOME=/root PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export MEMTRACE_BIN=$out/bin/memtrace
# Debian's interpreter alone: pyenv's builds are the host's, not the guest's kernel's concern.
export MEMTRACE_PYTHONS=debian-3.11
uname -r >$res/kernel
\$MEMTRACE_BIN -v -o /dev/null -- /bin/true 2>$res/verbose.log
cd $repo/internal/tracer && $out/bin/tracer.test -test.v -test.count=1 -test.run '$TRACER_TESTS' >$res/tracer.log 2>&1
echo \$? >$res/tracer.rc
# Attach and detach times of libc's full probe set, per attach path.
$out/bin/tracer.test -test.run X -test.bench Attach -test.benchtime ${BENCH_RUNS}x >$res/bench.log 2>&1
cd $repo/cmd/memtrace && $out/bin/e2e.test -test.v -test.count=$E2E_COUNT -test.timeout 30m -test.run '$E2E_TESTS' >$res/e2e.log 2>&1
echo \$? >$res/e2e.rc
EOF
}

# boot runs one kernel's guest and waits for it to power off.
boot() {
	local dir=$1 res=$2
	timeout --signal=KILL "$limit" qemu-system-x86_64 -accel "$accel" -cpu max -smp 2 -m 2048 \
		-display none -monitor none -serial "file:$res/console.log" -no-reboot \
		-kernel "$dir/vmlinuz" -initrd "$dir/initrd.gz" \
		-append "console=ttyS0 quiet panic=-1 memtrace.results=$res" \
		-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap" \
		-virtfs "local,path=$res,mount_tag=results,security_model=none,multidevs=remap" </dev/null
}

# unfinished says why a guest did not finish its tests, from what it left:
# the test running when it stopped, the end of its console (a panic, an
# oops, the OOM killer, init's "guest.sh exited with N") and of guest.out.
unfinished() {
	local res=$1
	local running
	running=$(grep -h '^=== RUN' "$res/tracer.log" "$res/e2e.log" 2>/dev/null | tail -1 || true)
	echo "running then: ${running:-no test started}"
	tail -n 15 "$res/console.log" 2>/dev/null | sed 's/^/console: /' || true
	tail -n 5 "$res/guest.out" 2>/dev/null | sed 's/^/guest.out: /' || true
}

# finished says whether a guest left both exit statuses.
finished() {
	[ -f "$1/tracer.rc" ] && [ -f "$1/e2e.rc" ]
}

# summarize prints one kernel's results and returns non-zero on any failure.
summarize() {
	local pkg=$1 res=$2 took=$3 bad=0 log
	local kernel
	kernel=$(cat "$res/kernel" 2>/dev/null || echo "did not boot")
	local pass fail
	pass=$(cat "$res"/tracer.log "$res"/e2e.log 2>/dev/null | grep -c '^--- PASS' || true)
	fail=$(cat "$res"/tracer.log "$res"/e2e.log 2>/dev/null | grep -c '^--- FAIL' || true)
	echo "== kernel $kernel ($pkg), ${took}s: $pass passed, $fail failed"
	if [ -s "$res/first-boot" ]; then
		echo "   booted again: an earlier guest did not finish its tests"
		sed 's/^/   earlier boot: /' "$res/first-boot"
	fi
	for log in tracer e2e; do
		if ! [ -f "$res/$log.rc" ]; then
			echo "   $log tests did not finish (see $res/console.log, $res/guest.out)"
			unfinished "$res" | sed 's/^/   /'
			bad=1
			continue
		fi
		grep -E '^--- (PASS|FAIL|SKIP)' "$res/$log.log" | sed 's/^--- /   /' || true
		[ "$(cat "$res/$log.rc")" = 0 ] || bad=1
	done
	grep -E 'msg=(kernel|attached|detached)' "$res/verbose.log" 2>/dev/null | sed 's/^/   -v: /' || true
	grep -E '^BenchmarkAttach' "$res/bench.log" 2>/dev/null | sed 's/^/   /' || true
	[ "$fail" = 0 ] || bad=1
	return $bad
}

mkdir -p "$out/bin" "$cache"
echo "test-kernels: building the test binaries"
(cd "$repo" && CGO_ENABLED=0 go build -o "$out/bin/memtrace" ./cmd/memtrace &&
	go test -c -o "$out/bin/e2e.test" ./cmd/memtrace &&
	go test -c -o "$out/bin/tracer.test" ./internal/tracer)

# Fetch every kernel first, then boot them all at once: a guest spends
# much of its time waiting (RCU grace periods, sleeps in the tests), so
# two guests side by side take little longer than one.
declare -A image_of
for meta in "${packages[@]}"; do
	pkg=$(image "$meta")
	image_of[$meta]=$pkg
	echo "test-kernels: $pkg: fetching, building its initramfs"
	prepare "$pkg"
	res=$out/$pkg
	rm -rf "$res" && mkdir -p "$res"
	guest_script "$res"
done
start=$(date +%s)
for meta in "${packages[@]}"; do
	pkg=${image_of[$meta]}
	echo "test-kernels: $pkg: booting (TCG) and running the tests"
	(
		boot "$cache/$pkg" "$out/$pkg" || echo "test-kernels: $pkg: qemu exited with $?"
		echo $(($(date +%s) - start)) >"$out/$pkg/took"
	) &
done
wait

# A guest that stops before its tests end is booted again, up to twice.
# Under multi-threaded TCG on a loaded host 6.12 guests panicked in the
# kernel's own text patching (see accel above), with no failed test in
# their logs; once, both of two boots did. What each earlier boot left is
# printed with the results, never hidden.
for attempt in 2 3; do
	for meta in "${packages[@]}"; do
		pkg=${image_of[$meta]}
		res=$out/$pkg
		finished "$res" && continue
		echo "test-kernels: $pkg: the guest did not finish its tests; booting it again (boot $attempt of 3)"
		{
			cat "$res/first-boot" 2>/dev/null || true
			echo "boot $((attempt - 1)):"
			unfinished "$res"
		} >"$out/$pkg.first-boot"
		rm -rf "$res.first" && mv "$res" "$res.first" && mkdir -p "$res"
		mv "$out/$pkg.first-boot" "$res/first-boot"
		guest_script "$res"
		(
			boot "$cache/$pkg" "$res" || echo "test-kernels: $pkg: qemu exited with $?"
			echo $(($(date +%s) - start)) >"$res/took"
		) &
	done
	wait
done

status=0
summary=()
for meta in "${packages[@]}"; do
	pkg=${image_of[$meta]}
	res=$out/$pkg
	if summarize "$pkg" "$res" "$(cat "$res/took")" >"$res/summary"; then
		summary+=("$(head -1 "$res/summary")")
	else
		status=1
		summary+=("$(head -1 "$res/summary") FAILED")
	fi
	cat "$res/summary"
done
echo "== kernel matrix (all kernels booted side by side: $(($(date +%s) - start))s)"
printf '%s\n' "${summary[@]}"
exit $status
