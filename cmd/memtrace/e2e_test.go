package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// leaksWant is what testdata/leaks.c does, per function (see its comments).
func leaksWant(churn uint64, glibcOnly bool) map[string]siteTotals {
	w := map[string]siteTotals{
		"heap:leak_malloc":         {Allocs: 3, AllocBytes: 300, LiveAllocs: 3, LiveBytes: 300},
		"heap:leak_calloc":         {Allocs: 2, AllocBytes: 400, LiveAllocs: 2, LiveBytes: 400},
		"heap:leak_realloc_chain":  {Allocs: 4, AllocBytes: 10 + 20 + 300000 + 600000, Frees: 3, FreedBytes: 10 + 20 + 300000, LiveAllocs: 1, LiveBytes: 600000},
		"heap:leak_posix_memalign": {Allocs: 2, AllocBytes: 512, LiveAllocs: 2, LiveBytes: 512},
		"heap:leak_aligned_alloc":  {Allocs: 1, AllocBytes: 512, LiveAllocs: 1, LiveBytes: 512},
		"heap:leak_memalign":       {Allocs: 1, AllocBytes: 1024, LiveAllocs: 1, LiveBytes: 1024},
		"heap:leak_valloc":         {Allocs: 1, AllocBytes: 100, LiveAllocs: 1, LiveBytes: 100},
		"heap:realloc_fail":        {Allocs: 1, AllocBytes: 50, LiveAllocs: 1, LiveBytes: 50},
		"heap:realloc_zero":        {Allocs: 1, AllocBytes: 70, Frees: 1, FreedBytes: 70},
		"heap:churn":               {Allocs: churn, AllocBytes: 64 * churn, Frees: churn, FreedBytes: 64 * churn},
		"mmap:map_leak":            {Allocs: 1, AllocBytes: 3 * 4096, LiveAllocs: 1, LiveBytes: 3 * 4096},
		"mmap:map_partial":         {Allocs: 1, AllocBytes: 4 * 4096, Frees: 1, FreedBytes: 4096, LiveAllocs: 2, LiveBytes: 3 * 4096},
	}
	if glibcOnly {
		w["heap:leak_pvalloc"] = siteTotals{Allocs: 1, AllocBytes: 100, LiveAllocs: 1, LiveBytes: 100}
		w["heap:leak_reallocarray"] = siteTotals{Allocs: 1, AllocBytes: 200, LiveAllocs: 1, LiveBytes: 200}
	}
	return w
}

// TestLeaksExact traces testdata/leaks.c from its first instruction, built
// against glibc (dynamic and static) and jemalloc, and checks every
// function's figures exactly: failed allocations, realloc(p, 0), a failed
// realloc, realloc chains through glibc's internal mremap, anonymous
// mappings (partial munmap), a file mapping that must not count.
func TestLeaksExact(t *testing.T) {
	needBPF(t)
	tests := []struct {
		name      string
		flags     []string
		churn     uint64
		glibcOnly bool
		// exactProcess: no allocator calls but the fixture's, so the process
		// totals are the sums of the table above.
		exactProcess bool
		// preload runs the fixture through env(1) with the CET-built
		// preload allocator: an exec to follow, and endbr64 to skip.
		preload bool
	}{
		{"glibc", nil, 1000000, true, true, false},
		{"glibc static", []string{"-static"}, 1000, true, false, false},
		{"jemalloc", []string{"-DNO_GLIBC_ONLY", "-ljemalloc"}, 1000, false, false, false},
		{"LD_PRELOAD endbr64 allocator after exec", nil, 1000, true, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin := fixture(t, "leaks.c", tt.flags...)
			args := []string{"--json", "--top", "0", "-v", "--", bin, strconv.FormatUint(tt.churn, 10)}
			if tt.preload {
				lib := fixture(t, "preload_alloc.c", "-shared", "-fPIC", "-fcf-protection=full")
				args = append(args[:5], append([]string{"/usr/bin/env", "LD_PRELOAD=" + lib}, args[5:]...)...)
			}
			r := runMemtrace(t, args...)
			if r.code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
			}
			if tt.preload {
				// free is `endbr64; jmp __libc_free`: the probe goes on the jmp.
				if !regexp.MustCompile(`function=free module=\S*preload_alloc\S* offset=\S+ at=\+4 `).MatchString(r.stderr) {
					t.Errorf("free of the preloaded allocator not probed at +4:\n%s", r.stderr)
				}
			}
			rep := parseNDJSON(t, r.stdout)
			p := rep.finalProcess(t)
			got := rep.byFunction(p.PID)
			want := leaksWant(tt.churn, tt.glibcOnly)
			for fn, w := range want {
				if got[fn] != w {
					t.Errorf("%s: got %+v, want %+v", fn, got[fn], w)
				}
			}
			for _, fn := range []string{"heap:fail_all", "mmap:map_file", "mmap:leak_realloc_chain", "heap:main", "mmap:main"} {
				if g, ok := got[fn]; ok {
					t.Errorf("%s must not appear (failed, file-backed or nested calls), got %+v", fn, g)
				}
			}
			if !p.Exited || p.LostEvents != 0 || p.UnmatchedFrees != 0 {
				t.Errorf("process: exited=%v lost=%d unmatched=%d, want true 0 0", p.Exited, p.LostEvents, p.UnmatchedFrees)
			}
			if !tt.exactProcess {
				return
			}
			var sum siteTotals
			for fn, w := range want {
				if strings.HasPrefix(fn, "heap:") {
					sum.Allocs += w.Allocs
					sum.AllocBytes += w.AllocBytes
					sum.Frees += w.Frees
					sum.FreedBytes += w.FreedBytes
					sum.LiveAllocs += w.LiveAllocs
					sum.LiveBytes += w.LiveBytes
				}
			}
			gotP := siteTotals{p.Allocs, p.AllocBytes, p.Frees, p.FreedBytes, p.LiveAllocs, p.LiveBytes}
			if gotP != sum {
				t.Errorf("process heap totals: got %+v, want %+v", gotP, sum)
			}
			// The peak is reached inside realloc_zero: all leaks so far plus its 70 bytes.
			if want := sum.LiveBytes + 70; p.PeakLiveBytes != want {
				t.Errorf("peak_live_bytes = %d, want %d", p.PeakLiveBytes, want)
			}
			m := p.Mmap
			if m.LiveBytes != 6*4096 || m.LiveRegions != 3 || m.Maps != 2 || m.MappedBytes != 7*4096 ||
				m.Unmaps != 1 || m.UnmappedBytes != 4096 || m.PeakLiveBytes != 7*4096 {
				t.Errorf("mmap totals: %+v", m)
			}
		})
	}
}

// TestThreads: 8 threads x 200 000 malloc/free pairs, exact, nothing lost.
func TestThreads(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "threads.c", "-pthread")
	r := runMemtrace(t, "--json", "--top", "0", "--", bin)
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	rep := parseNDJSON(t, r.stdout)
	p := rep.finalProcess(t)
	got := rep.byFunction(p.PID)["heap:work"]
	const n = 8 * 200000
	want := siteTotals{Allocs: n + 8, AllocBytes: 32*n + 8*4096, Frees: n, FreedBytes: 32 * n, LiveAllocs: 8, LiveBytes: 8 * 4096}
	if got != want {
		t.Errorf("work: got %+v, want %+v", got, want)
	}
	if p.LostEvents != 0 {
		t.Errorf("lost_events = %d, want 0", p.LostEvents)
	}
}

// TestAttachRunning attaches with -p to a process that already allocated:
// its frees of those blocks are unmatched, live never goes negative, and its
// exit mid-trace ends the run with a final report.
func TestAttachRunning(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "running.c")
	target, stdin, lines := startReady(t, bin)
	defer target.Process.Kill()

	mt := exec.Command(memtrace(t), "--json", "--top", "0", "-v", "-p", strconv.Itoa(target.Process.Pid))
	mtOut, _ := mt.StdoutPipe()
	mtErr, _ := mt.StderrPipe()
	if err := mt.Start(); err != nil {
		t.Fatal(err)
	}
	waitAttached(t, mtErr, io.Discard)
	fmt.Fprintln(stdin, "go")
	expectLine(t, lines, "done")
	fmt.Fprintln(stdin, "exit")
	out, _ := io.ReadAll(mtOut)
	if err := mt.Wait(); err != nil {
		t.Fatalf("memtrace: %v", err)
	}
	target.Wait()

	rep := parseNDJSON(t, string(out))
	p := rep.finalProcess(t)
	if p.PID != target.Process.Pid || !p.Exited {
		t.Errorf("process %d exited=%v, want %d true", p.PID, p.Exited, target.Process.Pid)
	}
	if p.UnmatchedFrees != 10 || p.LiveBytes != 5000 || p.LiveAllocs != 5 || p.Allocs != 5 || p.Frees != 0 {
		t.Errorf("got unmatched=%d live=%d/%d allocs=%d frees=%d, want 10 5000/5 5 0",
			p.UnmatchedFrees, p.LiveBytes, p.LiveAllocs, p.Allocs, p.Frees)
	}
	if got := rep.byFunction(p.PID)["heap:leak_after"]; got != (siteTotals{Allocs: 5, AllocBytes: 5000, LiveAllocs: 5, LiveBytes: 5000}) {
		t.Errorf("leak_after: %+v; call sites: %+v", got, rep.sites)
	}
}

func expectLine(t *testing.T, r *bufio.Reader, want string) {
	t.Helper()
	l, err := r.ReadString('\n')
	if err != nil || strings.TrimSpace(l) != want {
		t.Fatalf("fixture said %q (%v), want %q", l, err, want)
	}
}

// TestBadInput: each mistake gets one clear line on stderr and its code.
func TestBadInput(t *testing.T) {
	needBPF(t)
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-executable")
	os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644)
	garbage := filepath.Join(dir, "garbage")
	os.WriteFile(garbage, []byte("\x7fELF\x02\x01\x01 this is not an ELF file at all"), 0o755)
	stripped := fixture(t, "leaks.c", "-static", "-s")
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no such pid", []string{"-p", "999999999"}, exitNoProcess, "process 999999999: no such process"},
		{"bad pid", []string{"-p", "abc"}, exitUsage, "not a process ID"},
		// Refused before anything loads, as the process it is.
		{"kernel thread", []string{"-p", "2"}, exitNoProcess, "memtrace: process 2 (kthreadd) is a kernel thread: it has no user memory to trace"},
		{"filter with a target", []string{"--comm", "x", "--", "true"}, exitUsage, "--comm and --cgroup narrow the whole-host mode"},
		{"bad sample bytes", []string{"--sample-bytes", "lots", "--", "true"}, exitUsage, "not a byte count"},
		{"both", []string{"-p", "1", "--", "true"}, exitUsage, "not both"},
		{"--jvm-perfmap without a target", []string{"--jvm-perfmap"}, exitUsage, "--jvm-perfmap needs -p or a command"},
		{"bad sort", []string{"--sort", "size", "--", "true"}, exitUsage, "unknown sort key"},
		{"ring size not a power of two", []string{"--ring-size", "3000", "--", "true"}, exitUsage, "--ring-size 3000: must be a power of two"},
		{"unwritable --pprof", []string{"--pprof", "/no/such/dir/heap.pb.gz", "--", "true"}, exitUsage, "--pprof: open /no/such/dir/heap.pb.gz"},
		{"no such allocator", []string{"--allocator", "/no/such/lib.so", "--", "true"}, exitUsage, "--allocator: stat /no/such/lib.so"},
		{"allocator without malloc", []string{"--allocator", "/etc/passwd", "--", "true"}, exitUsage, "not an ELF file that defines malloc and free"},
		{"command not found", []string{"--", "/no/such/command"}, exitNotFound, "command not found"},
		{"not executable", []string{"--", notExec}, exitNotExec, "command not executable"},
		{"malformed ELF", []string{"--", garbage}, exitNotExec, "command not executable"},
		// Traced (resident memory only) unless resident attribution is off (e2e_resident_test.go).
		{"stripped static, resident off", []string{"--resident-bytes", "0", "--", stripped}, exitNoAllocator, "no allocator found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runMemtrace(t, tt.args...)
			if r.code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", r.code, tt.code, r.stderr)
			}
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "memtrace: ") || !strings.Contains(lines[0], tt.msg) {
				t.Errorf("stderr should be one line containing %q, got:\n%s", tt.msg, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout should be empty, got %q", r.stdout)
			}
		})
	}
}

// TestNotRoot: without privileges memtrace says so and exits 3.
func TestNotRoot(t *testing.T) {
	needBPF(t)
	bin := memtrace(t)
	os.Chmod(filepath.Dir(bin), 0o755)
	cmd := exec.Command(bin, "--", "true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != exitPermission {
		t.Fatalf("got %v, want exit %d; output:\n%s", err, exitPermission, out)
	}
	if !strings.Contains(string(out), "needs root") || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
		t.Errorf("want one line saying root is needed, got:\n%s", out)
	}
}

// TestCommandStatus: in -- mode memtrace exits with the command's status.
func TestCommandStatus(t *testing.T) {
	needBPF(t)
	tests := []struct {
		script string
		code   int
	}{
		{"exit 0", 0},
		{"exit 7", 7},
		{"kill -TERM $$", 128 + int(syscall.SIGTERM)},
	}
	for _, tt := range tests {
		t.Run(tt.script, func(t *testing.T) {
			r := runMemtrace(t, "--json", "--", "/bin/sh", "-c", tt.script)
			if r.code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", r.code, tt.code, r.stderr)
			}
			if p := parseNDJSON(t, r.stdout).finalProcess(t); !p.Exited {
				t.Errorf("process not marked exited: %+v", p)
			}
		})
	}
}

// TestDuration: -d ends a -p trace of a process that keeps running.
func TestDuration(t *testing.T) {
	needBPF(t)
	sleeper := exec.Command("sleep", "30")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer sleeper.Process.Kill()
	start := time.Now()
	r := runMemtrace(t, "--json", "-d", "500ms", "-p", strconv.Itoa(sleeper.Process.Pid))
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if p := parseNDJSON(t, r.stdout).finalProcess(t); p.Exited || p.PID != sleeper.Process.Pid {
		t.Errorf("got %+v, want pid %d not exited", p, sleeper.Process.Pid)
	}
	if time.Since(start) > 20*time.Second {
		t.Errorf("-d 500ms took %v", time.Since(start))
	}
}

// TestIntervalAndSignal: -i prints periodic (non-final) reports; SIGINT ends
// a -p trace with a final report and exit 0; several -p targets are kept apart.
func TestIntervalAndSignal(t *testing.T) {
	needBPF(t)
	var pids []string
	for i := 0; i < 2; i++ {
		c := exec.Command("sleep", "30")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer c.Process.Kill()
		pids = append(pids, strconv.Itoa(c.Process.Pid))
	}
	mt := exec.Command(memtrace(t), "--json", "-i", "100ms", "-p", pids[0], "--pid", pids[1])
	var stdout, stderr strings.Builder
	mt.Stdout, mt.Stderr = &stdout, &stderr
	if err := mt.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	mt.Process.Signal(syscall.SIGINT)
	if err := mt.Wait(); err != nil {
		t.Fatalf("memtrace: %v\n%s", err, stderr.String())
	}
	rep := parseNDJSON(t, stdout.String())
	periodic, final := map[int]int{}, map[int]int{}
	for _, p := range rep.procs {
		if p.Final {
			final[p.PID]++
		} else {
			periodic[p.PID]++
		}
	}
	for _, s := range pids {
		pid, _ := strconv.Atoi(s)
		if periodic[pid] < 2 || final[pid] != 1 {
			t.Errorf("pid %d: %d periodic and %d final records, want >= 2 and 1", pid, periodic[pid], final[pid])
		}
	}
}
