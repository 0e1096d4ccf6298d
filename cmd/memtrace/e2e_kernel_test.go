package main

import (
	"bytes"
	"fmt"

	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/memtrace/memtrace/internal/testwait"
)

// lacksEnv makes memtrace treat kernel features as missing
// (tracer/features.go), as an older kernel would.
const lacksEnv = "MEMTRACE_KERNEL_LACKS"

// TestKernelRefused: a kernel without an essential feature gets one line
// naming it and the release that brings it, exit 4, and the target is
// left alone: a -p target runs on untouched, a command never starts.
func TestKernelRefused(t *testing.T) {
	needBPF(t)
	t.Setenv(lacksEnv, "attach_cookie")
	want := func(stderr string) {
		t.Helper()
		re := regexp.MustCompile(`^memtrace: unsupported kernel: \S+ lacks bpf_get_attach_cookie \(Linux 5\.15\); memtrace needs Linux 5\.17 or later\n$`)
		if !re.MatchString(stderr) {
			t.Errorf("stderr %q, want one line matching %s", stderr, re)
		}
	}

	bin := fixture(t, "running.c")
	target, stdin, lines := startReady(t, bin)
	defer target.Process.Kill()
	r := runMemtrace(t, "-p", strconv.Itoa(target.Process.Pid))
	if r.code != exitKernel || r.stdout != "" {
		t.Errorf("-p: exit %d, stdout %q; want %d and nothing", r.code, r.stdout, exitKernel)
	}
	want(r.stderr)
	fmt.Fprintln(stdin, "go")
	expectLine(t, lines, "done")
	fmt.Fprintln(stdin, "exit")
	if err := target.Wait(); err != nil {
		t.Errorf("target after the refusal: %v", err)
	}

	ran := filepath.Join(t.TempDir(), "ran")
	r = runMemtrace(t, "--", "/bin/sh", "-c", "echo > "+ran)
	if r.code != exitKernel || r.stdout != "" {
		t.Errorf("--: exit %d, stdout %q; want %d and nothing", r.code, r.stdout, exitKernel)
	}
	want(r.stderr)
	if _, err := os.Stat(ran); err == nil {
		t.Error("--: the command ran although memtrace refused the kernel")
	}
}

// TestPerProbeSameFigures: the per-probe links older kernels get give the
// figures uprobe_multi links give, exactly, and say so in -v and JSON.
func TestPerProbeSameFigures(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "leaks.c")
	got := map[string]map[string]siteTotals{}
	for _, lacks := range []string{"", "uprobe_multi"} {
		t.Setenv(lacksEnv, lacks)
		r := runMemtrace(t, "--json", "--top", "0", "-v", "--", bin, "1000")
		if r.code != 0 {
			t.Fatalf("lacking %q: exit %d, stderr:\n%s", lacks, r.code, r.stderr)
		}
		attach := regexp.MustCompile(`msg=kernel release=(\S+) attach=(\S+)`).FindStringSubmatch(r.stderr)
		if attach == nil {
			t.Fatalf("lacking %q: no kernel line in -v:\n%s", lacks, r.stderr)
		}
		if lacks != "" && attach[2] != "per-probe" {
			t.Errorf("lacking %q: attach=%s, want per-probe", lacks, attach[2])
		}
		report := strings.SplitN(r.stdout, "\n", 2)[0]
		if w := fmt.Sprintf(`"kernel":"%s","attach":"%s"`, attach[1], attach[2]); !strings.Contains(report, w) {
			t.Errorf("lacking %q: report record %s, want it to hold %s", lacks, report, w)
		}
		rep := parseNDJSON(t, r.stdout)
		got[lacks] = rep.byFunction(rep.finalProcess(t).PID)
	}
	for fn, w := range leaksWant(1000, true) {
		if got[""][fn] != w || got["uprobe_multi"][fn] != w {
			t.Errorf("%s: got %+v (default) and %+v (per-probe), want %+v", fn, got[""][fn], got["uprobe_multi"][fn], w)
		}
	}
}

// waitReapers waits until no earlier run's reaper (tracer/reap.go) is
// still tearing per-probe links down: while one is, the kernel makes new
// attaches wait, and the whole-host tests would miss calls they count.
func waitReapers(t *testing.T) {
	t.Helper()
	testwait.For(t, "no reaper of per-probe links running", func() bool {
		envs, _ := filepath.Glob("/proc/[0-9]*/environ")
		for _, f := range envs {
			if b, err := os.ReadFile(f); err == nil && bytes.Equal(b, []byte("MEMTRACE_REAP_LINKS=1\x00")) {
				return false
			}
		}
		return true
	})
}

// TestSampledAttachPaths: sampled mode takes the uprobe session path where
// the kernel has it (Linux 6.13+: a call not sampled takes one trap), says
// so in -v and in the report record's attach field, and gives the figures
// the entry and return links give elsewhere: exact allocation counts, and
// estimates within 4 standard errors (checkSampled), on either path.
func TestSampledAttachPaths(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "sampling.c", "-lm")
	for _, tc := range []struct{ lacks, want string }{
		{"", "session"},
		{"uprobe_session", "multi"},
	} {
		t.Run("lacks="+tc.lacks, func(t *testing.T) {
			t.Setenv(lacksEnv, tc.lacks)
			r := runMemtrace(t, "-v", "--json", "--top", "0", "--sample-bytes", "65536", "--", bin)
			if r.code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
			}
			kernel := regexp.MustCompile(`msg=kernel release=(\S+) attach=(\S+) lacks="([^"]*)"`).FindStringSubmatch(r.stderr)
			if kernel == nil {
				t.Fatalf("no kernel line in -v:\n%s", r.stderr)
			}
			want := tc.want
			switch {
			case strings.Contains(kernel[3], "uprobe_multi links"):
				want = "per-probe"
			case strings.Contains(kernel[3], "uprobe sessions") && tc.lacks == "":
				// An older kernel (6.6 to 6.12): sessions are what it lacks.
				if kernelAtLeast(6, 13) {
					t.Errorf("Linux %s lacks uprobe sessions according to memtrace", kernel[1])
				}
				want = "multi"
			}
			if kernel[2] != want {
				t.Errorf("-v: attach=%s, want %s", kernel[2], want)
			}
			report := strings.SplitN(r.stdout, "\n", 2)[0]
			if w := fmt.Sprintf(`"kernel":"%s","attach":"%s"`, kernel[1], want); !strings.Contains(report, w) {
				t.Errorf("report record %s, want it to hold %s", report, w)
			}
			checkSampled(t, r)
		})
	}
}

// kernelAtLeast reports whether the running kernel is at least major.minor.
func kernelAtLeast(major, minor int) bool {
	var u syscall.Utsname
	if syscall.Uname(&u) != nil {
		return false
	}
	var b []byte
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	var ma, mi int
	fmt.Sscanf(string(b), "%d.%d", &ma, &mi)
	return ma > major || ma == major && mi >= minor
}

// TestSessionUnderAnotherTracer: on the session path an allocation that
// is not sampled skips its return, and the calls nested in it (glibc's
// malloc calling mmap) are recognized by its return address still on the
// stack. Another tracer's return probe on malloc replaces that address
// with its trampoline: the nested mmaps must still not count as the
// program's mappings. The other tracer here is an exact memtrace -p.
func TestSessionUnderAnotherTracer(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "bigblocks.c")
	target, stdin, lines := startReady(t, bin)
	defer target.Process.Kill()
	pid := strconv.Itoa(target.Process.Pid)
	start := func(args ...string) (*exec.Cmd, *strings.Builder, *bytes.Buffer) {
		mt := exec.Command(memtrace(t), append([]string{"-v", "--json", "-p", pid}, args...)...)
		var stdout strings.Builder
		var log bytes.Buffer
		mt.Stdout = &stdout
		stderr, _ := mt.StderrPipe()
		if err := mt.Start(); err != nil {
			t.Fatal(err)
		}
		waitAttached(t, stderr, &log)
		return mt, &stdout, &log
	}
	other, _, _ := start()
	defer other.Process.Kill()
	sampled, out, log := start("--sample-bytes", "64K")
	defer sampled.Process.Kill()
	fmt.Fprintln(stdin, "go")
	expectLine(t, lines, "done")
	fmt.Fprintln(stdin, "exit")
	if err := target.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := sampled.Wait(); err != nil {
		t.Fatalf("sampled memtrace: %v\n%s", err, log)
	}
	other.Wait()
	p := parseNDJSON(t, out.String()).finalProcess(t)
	if p.Allocs != 1000 || p.Mmap.Maps != 0 {
		t.Errorf("allocs %d, mmaps %d: want 1000 and 0 (the mmaps are malloc's and calloc's own)\n%s", p.Allocs, p.Mmap.Maps, log)
	}
}

// TestMapsAfterSkippedReturn: on the session path a malloc that is not
// sampled skips its return, and an anonymous mmap below its stack pointer
// is the allocator's own only if the stack walk finds malloc's code in the
// frame malloc was entered at (outer_frame). The program's own mappings
// made right after such a malloc, from a deeper frame and from the same
// one (testdata/mapsafter.c), must all count, with nothing lost; and
// glibc's mappings inside malloc and calloc (bigblocks.c, in
// TestSessionUnderAnotherTracer) none. Both attach paths.
func TestMapsAfterSkippedReturn(t *testing.T) {
	needBPF(t)
	sampledOnBothPaths(t, fixture(t, "mapsafter.c"), func(lacks string, r result) {
		var maps uint64
		i := strings.Index(r.stderr, "maps=")
		if i < 0 {
			t.Fatalf("lacking %q: no maps= from the fixture:\n%s", lacks, r.stderr)
		}
		if _, err := fmt.Sscanf(r.stderr[i:], "maps=%d", &maps); err != nil || maps != 200 {
			t.Fatalf("lacking %q: fixture said %q", lacks, r.stderr)
		}
		p := parseNDJSON(t, r.stdout).finalProcess(t)
		if p.Mmap.Maps != maps || p.Mmap.Unmaps != maps || p.LostEvents != 0 {
			t.Errorf("lacking %q: maps %d, unmaps %d, lost %d; want %d, %d, 0", lacks, p.Mmap.Maps, p.Mmap.Unmaps, p.LostEvents, maps, maps)
		}
	})
}

// sampledOnBothPaths runs memtrace --json --sample-bytes 64K on bin on
// the session path and, lacking uprobe sessions, on the entry and return
// links, and hands each successful run to check.
func sampledOnBothPaths(t *testing.T, bin string, check func(lacks string, r result)) {
	t.Helper()
	for _, lacks := range []string{"", "uprobe_session"} {
		t.Setenv(lacksEnv, lacks)
		r := runMemtrace(t, "--json", "--sample-bytes", "64K", "--", bin)
		if r.code != 0 {
			t.Fatalf("lacking %q: exit %d, stderr:\n%s", lacks, r.code, r.stderr)
		}
		check(lacks, r)
	}
}

// TestSampledAlignedCounts: glibc's memalign family tail-calls an
// unnamed helper, which for small alignments tail-calls malloc at the
// same stack pointer, and maps large blocks from there. Sampled mode must
// count each call once and none of those mappings
// (testdata/alignedbig.c: 400 calls, no mapping of the program's), on
// both attach paths. Before the memalign family kept its return on the
// session path, memalign(16, n) was counted twice when not sampled.
func TestSampledAlignedCounts(t *testing.T) {
	needBPF(t)
	sampledOnBothPaths(t, fixture(t, "alignedbig.c"), func(lacks string, r result) {
		p := parseNDJSON(t, r.stdout).finalProcess(t)
		if p.Allocs != 400 || p.Mmap.Maps != 0 || p.LostEvents != 0 {
			t.Errorf("lacking %q: allocs %d, maps %d, lost %d; want 400, 0, 0", lacks, p.Allocs, p.Mmap.Maps, p.LostEvents)
		}
	})
}

// TestSampledForgottenBlocks: blocks whose frees no probe will see (an
// exec'd program's, an exited process's) are forgotten through
// mt_forget_smpl, which drops their counts in the probes' filter too
// (testdata/sampled_exec.c: 100 blocks, every one sampled, then an exec).
// Deleted from user space, the 100 counts stayed behind.
func TestSampledForgottenBlocks(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "sampled_exec.c")
	for _, lacks := range []string{"", "uprobe_session"} {
		t.Setenv(lacksEnv, lacks)
		r := runMemtrace(t, "-v", "-o", os.DevNull, "--sample-bytes", "1", "--", bin)
		if r.code != 0 {
			t.Fatalf("lacking %q: exit %d, stderr:\n%s", lacks, r.code, r.stderr)
		}
		if !strings.Contains(r.stderr, `msg="exec: statistics restart"`) {
			t.Fatalf("lacking %q: no exec logged; stderr:\n%s", lacks, r.stderr)
		}
		if want := `msg="sampled blocks" blocks=0 filter_count=0`; !strings.Contains(r.stderr, want) {
			t.Errorf("lacking %q: want %s; stderr:\n%s", lacks, want, r.stderr)
		}
	}
}

// TestSampledFilterCount: the filter's counts, read in batches at the
// end of a -v run, sum to the sampled blocks still held (leaks.c leaves
// blocks live at its exit, and --sample-bytes 1 samples every one). A
// sum read wrong, or not at all, shows as a difference or as 0.
func TestSampledFilterCount(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "leaks.c")
	r := runMemtrace(t, "-v", "-o", os.DevNull, "--sample-bytes", "1", "--", bin, "0")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	var blocks, count int
	i := strings.Index(r.stderr, `msg="sampled blocks"`)
	if i < 0 {
		t.Fatalf("no sampled blocks logged; stderr:\n%s", r.stderr)
	}
	if _, err := fmt.Sscanf(r.stderr[i:], `msg="sampled blocks" blocks=%d filter_count=%d`, &blocks, &count); err != nil {
		t.Fatalf("%v in %q", err, r.stderr[i:])
	}
	if blocks == 0 || count != blocks {
		t.Errorf("blocks=%d filter_count=%d, want equal and not 0", blocks, count)
	}
}

// TestSampledFailedCalls: sampled mode's exact counts include the failed
// calls of malloc-like functions on the session path only (counted at
// entry, before the result is known), but never a request larger than the
// address space nor a calloc whose size overflows (testdata/failing.c).
func TestSampledFailedCalls(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "failing.c")
	for _, lacks := range []string{"", "uprobe_session"} {
		t.Setenv(lacksEnv, lacks)
		out := filepath.Join(t.TempDir(), "out.json")
		r := runMemtrace(t, "-v", "--json", "-o", out, "--sample-bytes", "64K", "--", bin)
		if r.code != 0 {
			t.Fatalf("lacking %q: exit %d, stderr:\n%s", lacks, r.code, r.stderr)
		}
		var failed uint64
		if _, err := fmt.Sscanf(r.stdout, "failed=%d", &failed); err != nil {
			t.Fatalf("fixture said %q", r.stdout)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		p := parseNDJSON(t, string(b)).finalProcess(t)
		// The 64 TiB calls that succeeded, and the 100-byte ones, count everywhere.
		want := [2]uint64{5 + 10 - failed, 500 + (10-failed)<<46}
		if strings.Contains(r.stderr, "attach=session") {
			want = [2]uint64{15, 500 + 10<<46}
		}
		if got := [2]uint64{p.Allocs, p.AllocBytes}; got != want {
			t.Errorf("lacking %q (%d calls of 64 TiB failed): allocs, alloc_bytes %v, want %v", lacks, failed, got, want)
		}
	}
}
