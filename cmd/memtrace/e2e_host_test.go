package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/testwait"
)

// Sampled mode and the whole-host mode, with real BPF. The whole-host
// tests narrow memtrace to their fixtures with --comm, so that they
// neither report nor slow down the rest of the machine more than the
// system-wide probes must.

// sampledSite holds the fields of a callsite record these tests check.
type sampledSite struct {
	Type            string `json:"type"`
	PID             int    `json:"pid"`
	Comm            string `json:"comm"`
	Category        string `json:"category"`
	Function        string `json:"function"`
	LiveBytes       uint64 `json:"live_bytes"`
	LiveAllocs      uint64 `json:"live_allocs"`
	Allocs          uint64 `json:"allocs"`
	Final           bool   `json:"final"`
	Sampled         bool   `json:"sampled"`
	SampleBytes     uint64 `json:"sample_bytes"`
	LiveBytesStderr uint64 `json:"live_bytes_stderr"`
}

type sampledProcess struct {
	processRecord
	Sampled         bool   `json:"sampled"`
	SampleBytes     uint64 `json:"sample_bytes"`
	LiveBytesStderr uint64 `json:"live_bytes_stderr"`
}

type sampledRun struct {
	procs []sampledProcess
	sites []sampledSite
}

func parseSampled(t *testing.T, out string) sampledRun {
	t.Helper()
	var r sampledRun
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var head struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(sc.Bytes(), &head); err != nil {
			t.Fatalf("stdout line is not JSON: %v: %q", err, sc.Text())
		}
		switch head.Type {
		case "process":
			var p sampledProcess
			if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
				t.Fatal(err)
			}
			r.procs = append(r.procs, p)
		case "callsite":
			var s sampledSite
			if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
				t.Fatal(err)
			}
			r.sites = append(r.sites, s)
		}
	}
	return r
}

// truth parses the "truth k=v ..." line a fixture writes to stderr.
func truth(t *testing.T, stderr string) map[string]uint64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^truth (.*)$`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("the fixture printed no truth line:\n%s", stderr)
	}
	out := map[string]uint64{}
	for _, kv := range strings.Fields(m[1]) {
		k, v, _ := strings.Cut(kv, "=")
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("truth %q: %v", kv, err)
		}
		out[k] = n
	}
	return out
}

// TestSampledEstimates is the statistical test of sampled mode: at
// --sample-bytes 65536 the live bytes that testdata/sampling.c leaks from
// each of two functions (tens of MB, in sizes from 16 B to 256 KiB, some
// grown by realloc) are estimated within 4 standard errors of the truth
// the fixture prints; the process's allocation calls and bytes, counted
// in BPF, are exact; what a third function frees entirely is estimated
// at exactly 0 (every sampled block's free is seen).
//
// A correct estimator fails a 4-standard-error check with probability
// 6·10^-5 per function; run the check many times with
// MEMTRACE_SAMPLING_RUNS=N to see the errors' spread (they should have
// mean 0 and standard deviation 1 in units of the standard error).
func TestSampledEstimates(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "sampling.c", "-lm")
	runs := 1
	if n, err := strconv.Atoi(os.Getenv("MEMTRACE_SAMPLING_RUNS")); err == nil && n > 1 {
		runs = n
	}
	var zs [2][]float64
	for range runs {
		r := runMemtrace(t, "--json", "--top", "0", "--sample-bytes", "65536", "--", bin)
		if r.code != 0 {
			t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
		}
		z := checkSampled(t, r)
		zs[0], zs[1] = append(zs[0], z[0]), append(zs[1], z[1])
	}
	if runs > 1 {
		for i, fn := range []string{"leak_small", "leak_large"} {
			var m, ss float64
			for _, z := range zs[i] {
				m += z
				ss += z * z
			}
			m /= float64(runs)
			t.Logf("%s over %d runs: errors mean %+.3f, standard deviation %.3f (standard errors)", fn, runs, m, math.Sqrt(ss/float64(runs)-m*m))
		}
	}
}

// checkSampled checks a sampled run of testdata/sampling.c at
// --sample-bytes 65536 (TestSampledEstimates) and returns the errors of
// leak_small's and leak_large's estimates, in standard errors.
func checkSampled(t *testing.T, r result) (zs [2]float64) {
	t.Helper()
	want := truth(t, r.stderr)
	run := parseSampled(t, r.stdout)
	var p *sampledProcess
	for i := range run.procs {
		if run.procs[i].Final {
			p = &run.procs[i]
		}
	}
	if p == nil {
		t.Fatalf("no final process record:\n%s", r.stdout)
	}
	if !p.Sampled || p.SampleBytes != 65536 || p.LostEvents != 0 {
		t.Errorf("process: sampled %v sample_bytes %d lost %d, want true, 65536, 0", p.Sampled, p.SampleBytes, p.LostEvents)
	}
	if p.Allocs != want["allocs"] || p.AllocBytes != want["alloc_bytes"] {
		t.Errorf("allocation calls %d, bytes %d; want exactly %d, %d", p.Allocs, p.AllocBytes, want["allocs"], want["alloc_bytes"])
	}
	type est struct{ live, variance float64 }
	byFn := map[string]*est{}
	for _, s := range run.sites {
		if !s.Final || s.Category != "heap" {
			continue
		}
		if !s.Sampled || s.SampleBytes != 65536 || s.Comm != p.Comm || s.Comm == "" {
			t.Errorf("site %s: sampled %v sample_bytes %d comm %q", s.Function, s.Sampled, s.SampleBytes, s.Comm)
		}
		e := byFn[s.Function]
		if e == nil {
			e = &est{}
			byFn[s.Function] = e
		}
		e.live += float64(s.LiveBytes)
		e.variance += float64(s.LiveBytesStderr) * float64(s.LiveBytesStderr)
	}
	for i, fn := range []string{"leak_small", "leak_large"} {
		e := byFn[fn]
		truthLive := float64(want[strings.TrimPrefix(fn, "leak_")+"_live"])
		if e == nil {
			t.Fatalf("no call site of %s", fn)
		}
		se := math.Sqrt(e.variance)
		z := (e.live - truthLive) / se
		zs[i] = z
		t.Logf("%s: estimate %.0f, truth %.0f, standard error %.0f: %+.2f standard errors", fn, e.live, truthLive, se, z)
		if math.Abs(z) > 4 {
			t.Errorf("%s: estimate %.0f is %.1f standard errors (%.0f) from the truth %.0f", fn, e.live, z, se, truthLive)
		}
	}
	if c := byFn["churn"]; c == nil || c.live != 0 {
		t.Errorf("churn frees all it allocates, estimated live %+v, want 0", c)
	}
	return zs
}

// hostRun is a whole-host memtrace running in the background.
type hostRun struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	mu     sync.Mutex
	stderr strings.Builder
	lines  chan string
}

// startHost starts memtrace -v --heap with args and waits until it has
// attached. --heap: these tests trace allocators (the whole host's default
// is resident memory only).
func startHost(t *testing.T, args ...string) *hostRun {
	t.Helper()
	return startHostWith(t, append([]string{"--heap"}, args...)...)
}

// startHostWith starts memtrace -v with args and waits until it has attached.
func startHostWith(t *testing.T, args ...string) *hostRun {
	t.Helper()
	waitReapers(t) // e2e_kernel_test.go
	h := &hostRun{cmd: exec.Command(memtrace(t), append([]string{"-v", "--json"}, args...)...), lines: make(chan string, 1<<16)}
	h.cmd.Stdout = &h.stdout
	pipe, err := h.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if h.cmd.ProcessState == nil {
			h.cmd.Process.Kill()
			h.cmd.Wait()
		}
	})
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			h.mu.Lock()
			h.stderr.WriteString(sc.Text() + "\n")
			h.mu.Unlock()
			select {
			case h.lines <- sc.Text():
			default:
			}
		}
		close(h.lines)
	}()
	h.waitFor(t, "msg=attached")
	return h
}

// waitFor waits for a stderr line containing s (testwait.Limit at most).
func (h *hostRun) waitFor(t *testing.T, s string) {
	t.Helper()
	d := testwait.Limit
	timeout := time.After(d)
	for {
		select {
		case l, ok := <-h.lines:
			if !ok {
				t.Fatalf("memtrace ended before logging %q:\n%s", s, h.errors())
			}
			if strings.Contains(l, s) {
				return
			}
		case <-timeout:
			t.Fatalf("memtrace did not log %q within %v:\n%s", s, d, h.errors())
		}
	}
}

// waitExitsHeld waits until the exits of pids are handled, their final
// records held for the next batch (-v's "exit held"), in whatever order.
// The batch is written at the next report (host.ExitBatch: the final one
// when the test stops the run). A line is logged as soon as the exit is
// handled, maybe while the test waited for another one (startProbed):
// what stderr already holds counts too.
func (h *hostRun) waitExitsHeld(t *testing.T, pids ...int) {
	t.Helper()
	left := map[string]bool{}
	logged := h.errors() // every line is in stderr before it is in lines
	for _, pid := range pids {
		if want := `msg="exit held" pid=` + strconv.Itoa(pid) + " "; !strings.Contains(logged, want) {
			left[want] = true
		}
	}
	timeout := time.After(time.Minute)
	for len(left) > 0 {
		select {
		case l, ok := <-h.lines:
			if !ok {
				t.Fatalf("memtrace ended before handling the exits of %v:\n%s", pids, h.errors())
			}
			for want := range left {
				if strings.Contains(l, want) {
					delete(left, want)
				}
			}
		case <-timeout:
			t.Fatalf("memtrace did not handle the exits of %v within a minute:\n%s", pids, h.errors())
		}
	}
}

// waitExitsHandled waits until the exits of pids are handled, whether a
// process had records (-v's "exit held") or none ("exit unrecorded": no
// allocation or sampled fault while traced; logged with --comm only). It reads stderr as a whole,
// not lines, which a thousand exits can overflow.
func (h *hostRun) waitExitsHandled(t *testing.T, pids ...int) {
	t.Helper()
	left := map[int]bool{}
	for _, pid := range pids {
		left[pid] = true
	}
	handled := regexp.MustCompile(`msg="exit (?:held|unrecorded)" pid=(\d+) `)
	read := 0
	testwait.For(t, fmt.Sprintf("memtrace to handle the exits of %d processes", len(pids)), func() bool {
		errs := h.errors()
		end := strings.LastIndexByte(errs, '\n') + 1 // whole lines only
		for _, m := range handled.FindAllStringSubmatch(errs[read:end], -1) {
			pid, _ := strconv.Atoi(m[1])
			delete(left, pid)
		}
		read = end
		return len(left) == 0
	})
}

func (h *hostRun) errors() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stderr.String()
}

// stop ends the run as Ctrl-C does and returns its records.
func (h *hostRun) stop(t *testing.T) sampledRun {
	t.Helper()
	h.cmd.Process.Signal(syscall.SIGINT)
	if err := h.cmd.Wait(); err != nil {
		t.Fatalf("memtrace: %v\n%s", err, h.errors())
	}
	return parseSampled(t, h.stdout.String())
}

// rss is memtrace's resident memory in KiB.
func (h *hostRun) rss() string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", h.cmd.Process.Pid))
	m := regexp.MustCompile(`VmRSS:\s+(\d+ kB)`).FindSubmatch(b)
	if m == nil {
		return "?"
	}
	return string(m[1])
}

// exitedRecord returns pid's record of its exit.
func (r sampledRun) exitedRecord(pid int) (sampledProcess, bool) {
	for _, p := range r.procs {
		if p.PID == pid && p.Exited && p.Final {
			return p, true
		}
	}
	return sampledProcess{}, false
}

func (r sampledRun) liveByFunction(pid int) map[string]uint64 {
	m := map[string]uint64{}
	for _, s := range r.sites {
		if s.PID == pid && s.Category == "heap" {
			m[s.Function] += s.LiveBytes
		}
	}
	return m
}

// chrootWithOwnLibc makes a root directory holding a copy of the host's
// libc and dynamic linker (new inodes: for the kernel a different file)
// and bin as /NAME.
func chrootWithOwnLibc(t *testing.T, bin, name string) string {
	t.Helper()
	root := t.TempDir()
	for _, f := range []string{"/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2", bin} {
		dst := filepath.Join(root, f)
		if f == bin {
			dst = filepath.Join(root, name)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		copyFile(t, f, dst)
	}
	return root
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestHostPicksUpNewProcesses: with no target, memtrace finds processes
// started after it — one on the host's libc, one in a separate mount
// namespace chroot'ed into a root with its own copy of libc, a file
// memtrace has never seen — probes their allocators and reports both,
// exactly (--sample-bytes 0), with their final records at their exit.
// (For its 2 seconds the host's libc carries system-wide probes.)
func TestHostPicksUpNewProcesses(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "hostproc.c")
	// A name of its own, so that --comm selects only these processes.
	own := filepath.Join(filepath.Dir(bin), "mt-newproc")
	copyFile(t, bin, own)
	root := chrootWithOwnLibc(t, bin, "mt-newproc")
	h := startHost(t, "--comm", "mt-newproc", "--sample-bytes", "0")

	// Each waits before allocating until memtrace has seen its exec,
	// waited for its libraries and probed its libc (new to memtrace).
	onHost := exec.Command(own, "-1", "5")
	inRoot := exec.Command("unshare", "-m", "chroot", root, "/mt-newproc", "-1", "7")
	for _, c := range []*exec.Cmd{onHost, inRoot} {
		h.startProbed(t, c) // e2e_host_exports_test.go
		if err := c.Wait(); err != nil {
			t.Fatalf("%v: %v", c.Args, err)
		}
	}
	h.waitExitsHeld(t, onHost.Process.Pid, inRoot.Process.Pid)
	run := h.stop(t)
	// Every report record names the kernel and attach path, the exits'
	// batches too (they had "kernel":"","attach":"").
	// Their times, the newest event's of each, never go back (the exits'
	// batches were timed "now", after the final report's newest event).
	batches, last := 0, uint64(0)
	for l := range strings.Lines(h.stdout.String()) {
		var rec struct {
			Type, Kernel, Attach string
			TimeNS               uint64 `json:"time_ns"`
		}
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Type == "report" {
			batches++
			if rec.Kernel == "" || rec.Attach == "" {
				t.Errorf("report record without kernel or attach: %s", l)
			}
			if rec.TimeNS < last {
				t.Errorf("report time %d before the previous report's %d", rec.TimeNS, last)
			}
			last = max(last, rec.TimeNS)
		}
	}
	if batches < 2 {
		t.Errorf("%d report records, want the exits' batch and the final one", batches)
	}
	errs := h.errors()
	if !strings.Contains(errs, "path="+root+"/lib/x86_64-linux-gnu/libc.so.6") &&
		!regexp.MustCompile(`msg=probed pid=`+strconv.Itoa(inRoot.Process.Pid)+` module=\S*libc\.so\.6`).MatchString(errs) {
		t.Errorf("the chroot's own libc was not probed:\n%s", errs)
	}
	for _, c := range []struct {
		name string
		pid  int
		n    uint64
	}{{"host libc", onHost.Process.Pid, 5}, {"own libc in a mount namespace", inRoot.Process.Pid, 7}} {
		p, ok := run.exitedRecord(c.pid)
		if !ok {
			t.Errorf("%s: no final record of pid %d:\n%s", c.name, c.pid, h.stdout.String())
			continue
		}
		if p.Comm != "mt-newproc" || p.Allocs != 2*c.n || p.AllocBytes != 1500*c.n || p.LiveBytes != 1000*c.n || p.Frees != c.n {
			t.Errorf("%s: %+v; want comm mt-newproc, %d allocs of %d bytes, %d live, %d frees", c.name, p.processRecord, 2*c.n, 1500*c.n, 1000*c.n, c.n)
		}
		if live := run.liveByFunction(c.pid); live["host_leak"] != 1000*c.n || live["host_churn"] != 0 {
			t.Errorf("%s: live by function %v, want host_leak %d, host_churn 0", c.name, live, 1000*c.n)
		}
	}
}

// TestHostNamesUnsampled: a process running before memtrace starts that
// makes a few small allocations, none sampled, is reported under its name
// with its exact counts. The counts registered it first, nameless: its
// records said comm "" (the text report "?").
func TestHostNamesUnsampled(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "hostproc.c")
	root := chrootWithOwnLibc(t, bin, "mt-unsampled")
	// Waits for a byte, makes 10 small calls, then holds 60 s: still
	// running when memtrace ends.
	c := exec.Command("unshare", "-m", "chroot", root, "/mt-unsampled", "-1", "5", "60000")
	in, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	var pid int
	testwait.For(t, "mt-unsampled to start", func() bool {
		if out, err := exec.Command("pgrep", "-x", "mt-unsampled").Output(); err == nil {
			pid, _ = strconv.Atoi(strings.Fields(string(out))[0])
		}
		return pid != 0
	})
	h := startHost(t, "--comm", "mt-unsampled", "--resident-bytes", "0") // sampled, 512 KiB
	if _, err := in.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	// Its byte back once its calls are made: the probes counted them.
	if _, err := io.ReadFull(out, make([]byte, 1)); err != nil {
		t.Fatalf("mt-unsampled did not make its calls: %v", err)
	}
	run := h.stop(t)
	var found bool
	for _, p := range run.procs {
		if p.PID == pid && p.Final {
			found = true
			if p.Comm != "mt-unsampled" || p.Allocs != 10 || p.AllocBytes != 7500 {
				t.Errorf("final record %+v; want comm mt-unsampled, 10 allocs of 7500 bytes", p.processRecord)
			}
		}
	}
	if !found {
		t.Errorf("no final record of pid %d:\n%s", pid, h.stdout.String())
	}
}

// TestHostShortLived: 1000 processes started and ended during a sampled
// whole-host run are all reported once, at their exit, with their exact
// allocation counts, and then dropped. memtrace's resident memory before
// and after is logged (a benchmark figure, not asserted).
//
// The fixtures run chroot'ed on their own copy of libc: system-wide probes
// on the host's libc would be in every process of the machine for the
// test's duration (valgrind, for one, stops on their breakpoints).
func TestHostShortLived(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "hostproc.c")
	root := chrootWithOwnLibc(t, bin, "mt-shortlived")
	h := startHost(t, "--comm", "mt-shortlived")
	// One first, to have its libc probed (with --comm, memtrace probes
	// only what the processes it traces use), then the thousand.
	primer := exec.Command("chroot", root, "/mt-shortlived", "1500", "1")
	if err := primer.Start(); err != nil {
		t.Fatal(err)
	}
	h.waitFor(t, "msg=probed")
	before := h.rss()
	const n = 1000
	pids := make(chan int, n)
	var wg sync.WaitGroup
	jobs := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				c := exec.Command("chroot", root, "/mt-shortlived", "0", "5")
				if err := c.Run(); err != nil {
					t.Errorf("run fixture: %v", err)
					return
				}
				pids <- c.Process.Pid
			}
		}()
	}
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()
	close(pids)
	primer.Wait()
	all := []int{primer.Process.Pid}
	for pid := range pids {
		all = append(all, pid)
	}
	h.waitExitsHandled(t, all...)
	after := h.rss()
	run := h.stop(t)
	t.Logf("memtrace resident memory: %s before the %d processes, %s after", before, n, after)
	seen := map[int]int{}
	for _, p := range run.procs {
		if p.Exited {
			seen[p.PID]++
		}
	}
	missing, wrong := 0, 0
	for _, pid := range all[1:] {
		p, ok := run.exitedRecord(pid)
		switch {
		case !ok:
			missing++
		case seen[pid] != 1 || p.Allocs != 10 || p.AllocBytes != 7500 || !p.Sampled:
			wrong++
			if wrong <= 3 {
				t.Errorf("pid %d: %d exit records, %+v; want one, with 10 allocations of 7500 bytes in all, sampled", pid, seen[pid], p)
			}
		}
	}
	if missing > 0 || wrong > 0 {
		t.Errorf("of %d short-lived processes, %d not reported, %d reported wrong", n, missing, wrong)
	}
	// The final report lists what still runs: none of them.
	for _, p := range run.procs {
		if !p.Exited && p.Comm == "mt-shortlived" {
			t.Errorf("pid %d still held at the end: %+v", p.PID, p.processRecord)
		}
	}
}

// TestHostCgroup: --cgroup traces the processes of a cgroup v2 and of the
// cgroups below it, and no other.
func TestHostCgroup(t *testing.T) {
	needBPF(t)
	mnt := "/sys/fs/cgroup/unified"
	if _, err := os.Stat(mnt + "/cgroup.procs"); err != nil {
		mnt = "/sys/fs/cgroup"
		if _, err := os.Stat(mnt + "/cgroup.procs"); err != nil {
			t.Skip("no cgroup v2 hierarchy")
		}
	}
	cg := filepath.Join(mnt, fmt.Sprintf("memtrace-test-%d", os.Getpid()))
	child := filepath.Join(cg, "child")
	if err := os.MkdirAll(child, 0o755); err != nil {
		t.Skipf("cannot create a cgroup: %v", err)
	}
	defer os.Remove(cg)
	defer os.Remove(child)
	bin := fixture(t, "hostproc.c")
	root := chrootWithOwnLibc(t, bin, "mt-cgroup") // as in TestHostShortLived
	h := startHost(t, "--comm", "mt-cgroup", "--cgroup", cg, "--sample-bytes", "0")
	// Both wait before allocating; one enters the child cgroup before it
	// executes the fixture.
	in := exec.Command("/bin/sh", "-c", `echo $$ > "$1/cgroup.procs" && exec chroot "$2" /mt-cgroup 800 3`, "sh", child, root)
	out := exec.Command("chroot", root, "/mt-cgroup", "800", "4")
	for _, c := range []*exec.Cmd{in, out} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	if err := in.Wait(); err != nil {
		t.Fatalf("fixture in the cgroup: %v", err)
	}
	out.Wait()
	h.waitExitsHeld(t, in.Process.Pid)
	run := h.stop(t)
	if p, ok := run.exitedRecord(in.Process.Pid); !ok || p.Allocs != 6 || p.LiveBytes != 3000 {
		t.Errorf("the process in the cgroup: %+v (reported %v), want 6 allocations, 3000 bytes live", p.processRecord, ok)
	}
	if p, ok := run.exitedRecord(out.Process.Pid); ok {
		t.Errorf("the process outside the cgroup was reported: %+v", p.processRecord)
	}
}
