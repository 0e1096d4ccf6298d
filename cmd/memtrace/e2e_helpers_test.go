package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/testwait"
)

// These tests run the real memtrace binary, as root, with real BPF, against C
// fixtures in ../../testdata compiled here with gcc. Without BPF they skip,
// except under CI=true, where a skip would hide a broken pipeline.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	binDir    string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "memtrace-e2e-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// needBPF skips (or, under CI, fails) when this machine cannot run the probes.
func needBPF(t *testing.T) {
	t.Helper()
	why := ""
	switch {
	case runtime.GOOS != "linux" || runtime.GOARCH != "amd64":
		why = "the probes are built for linux/amd64"
	case os.Geteuid() != 0:
		why = "tracing needs root"
	default:
		if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
			why = "the kernel has no BTF"
		}
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true but %s: the BPF tests must run in CI", why)
	}
	t.Skip(why)
}

// memtrace builds the binary once per test run; MEMTRACE_BIN names a
// prebuilt one instead (the kernel matrix's guests have no Go build cache).
func memtrace(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binPath = os.Getenv("MEMTRACE_BIN"); binPath != "" {
			return
		}
		binPath = filepath.Join(binDir, "memtrace")
		// Built as `make build` builds it: static (TestStaticBinary).
		cmd := exec.Command("go", "build", "-o", binPath, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = &buildError{out: string(out), err: err}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return "build memtrace: " + e.err.Error() + "\n" + e.out }

var (
	fixtureMu sync.Mutex
	fixtures  = map[string]string{}
)

// fixture compiles testdata/src with gcc and flags, once per distinct build.
func fixture(t *testing.T, src string, flags ...string) string {
	t.Helper()
	return compile(t, "gcc", src, flags...)
}

// fixtureCXX is fixture for C++ sources.
func fixtureCXX(t *testing.T, src string, flags ...string) string {
	t.Helper()
	return compile(t, "g++", src, flags...)
}

func compile(t *testing.T, compiler, src string, flags ...string) string {
	t.Helper()
	key := compiler + " " + src + " " + strings.Join(flags, " ")
	fixtureMu.Lock()
	defer fixtureMu.Unlock()
	if p, ok := fixtures[key]; ok {
		return p
	}
	base := strings.NewReplacer("/", "_", ".c", "", ".cc", "").Replace(src)
	name := base + "-" + strings.NewReplacer(" ", "", "-", "", "=", "", "/", "").Replace(strings.Join(flags, ""))
	if len(name) > 200 {
		// python-config's flags: past NAME_MAX the linker cannot write it.
		name = fmt.Sprintf("%s-%x", base, sha256.Sum256([]byte(key)))
	}
	out := filepath.Join(binDir, name)
	args := append([]string{"-O2", "-g", "-Wall", "-o", out, filepath.Join("..", "..", "testdata", src)}, flags...)
	if b, err := exec.Command(compiler, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", compiler, args, err, b)
	}
	fixtures[key] = out
	return out
}

type result struct {
	stdout, stderr string
	code           int
}

// runMemtrace runs memtrace with args and returns what it printed and its exit code.
func runMemtrace(t *testing.T, args ...string) result {
	t.Helper()
	return runCmd(t, exec.Command(memtrace(t), args...))
}

// runCmd runs a memtrace command and returns what it printed and its exit code.
func runCmd(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run memtrace: %v", err)
	}
	return result{stdout.String(), stderr.String(), code}
}

// processRecord and siteRecord hold the NDJSON fields the tests check.
type processRecord struct {
	Type           string `json:"type"`
	PID            int    `json:"pid"`
	Comm           string `json:"comm"`
	LiveBytes      uint64 `json:"live_bytes"`
	LiveAllocs     uint64 `json:"live_allocs"`
	Allocs         uint64 `json:"allocs"`
	AllocBytes     uint64 `json:"alloc_bytes"`
	Frees          uint64 `json:"frees"`
	FreedBytes     uint64 `json:"freed_bytes"`
	PeakLiveBytes  uint64 `json:"peak_live_bytes"`
	UnmatchedFrees uint64 `json:"unmatched_frees"`
	LostEvents     uint64 `json:"lost_events"`
	Final          bool   `json:"final"`
	Exited         bool   `json:"exited"`
	Mmap           struct {
		LiveBytes     uint64 `json:"live_bytes"`
		LiveRegions   uint64 `json:"live_regions"`
		Maps          uint64 `json:"maps"`
		MappedBytes   uint64 `json:"mapped_bytes"`
		Unmaps        uint64 `json:"unmaps"`
		UnmappedBytes uint64 `json:"unmapped_bytes"`
		PeakLiveBytes uint64 `json:"peak_live_bytes"`
	} `json:"mmap"`
}

type siteRecord struct {
	Type       string `json:"type"`
	PID        int    `json:"pid"`
	Category   string `json:"category"`
	Function   string `json:"function"`
	File       string `json:"file"`
	Line       int    `json:"line"`
	Module     string `json:"module"`
	Address    string `json:"address"`
	LiveBytes  uint64 `json:"live_bytes"`
	LiveAllocs uint64 `json:"live_allocs"`
	Allocs     uint64 `json:"allocs"`
	AllocBytes uint64 `json:"alloc_bytes"`
	Frees      uint64 `json:"frees"`
	FreedBytes uint64 `json:"freed_bytes"`
	Final      bool   `json:"final"`
	Stack      []struct {
		Function string `json:"function"`
		File     string `json:"file"`
		Line     int    `json:"line"`
		Module   string `json:"module"`
		Address  string `json:"address"`
	} `json:"stack"`
	StackTruncated *bool `json:"stack_truncated"`
	BeforeTable    bool  `json:"before_table"`
}

// siteTotals sums a function's call sites of one category: a function may
// call the allocator from several places (unrolled loops, several lines).
type siteTotals struct {
	Allocs, AllocBytes, Frees, FreedBytes, LiveAllocs, LiveBytes uint64
}

type ndjson struct {
	procs []processRecord
	sites []siteRecord
}

// completeLines is out up to its last newline: what a writer still
// running has written whole.
func completeLines(out string) string { return out[:strings.LastIndexByte(out, '\n')+1] }

func parseNDJSON(t *testing.T, out string) ndjson {
	t.Helper()
	var r ndjson
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var head struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(line, &head); err != nil {
			t.Fatalf("stdout line is not JSON: %v: %q", err, line)
		}
		switch head.Type {
		case "process":
			var p processRecord
			if err := json.Unmarshal(line, &p); err != nil {
				t.Fatal(err)
			}
			r.procs = append(r.procs, p)
		case "callsite":
			var s siteRecord
			if err := json.Unmarshal(line, &s); err != nil {
				t.Fatal(err)
			}
			r.sites = append(r.sites, s)
		case "":
			t.Fatalf("record without type: %q", line)
		}
	}
	return r
}

// byFunction sums the final call sites of pid per (category, function).
func (r ndjson) byFunction(pid int) map[string]siteTotals {
	m := map[string]siteTotals{}
	for _, s := range r.sites {
		if s.PID != pid || !s.Final {
			continue
		}
		k := s.Category + ":" + s.Function
		v := m[k]
		v.Allocs += s.Allocs
		v.AllocBytes += s.AllocBytes
		v.Frees += s.Frees
		v.FreedBytes += s.FreedBytes
		v.LiveAllocs += s.LiveAllocs
		v.LiveBytes += s.LiveBytes
		m[k] = v
	}
	return m
}

// finalProcess returns the one final process record.
func (r ndjson) finalProcess(t *testing.T) processRecord {
	t.Helper()
	var found []processRecord
	for _, p := range r.procs {
		if p.Final {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want 1 final process record, got %d: %+v", len(found), r.procs)
	}
	return found[0]
}

// startReady starts a fixture that prints "ready" once it has allocated
// what it allocates before memtrace attaches, and waits for that line.
func startReady(t *testing.T, bin string) (*exec.Cmd, io.Writer, *bufio.Reader) {
	t.Helper()
	target := exec.Command(bin)
	stdin, _ := target.StdinPipe()
	stdout, _ := target.StdoutPipe()
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewReader(stdout)
	expectLine(t, lines, "ready")
	return target, stdin, lines
}

// startAttached runs `memtrace -v ARGS -p PID` and returns once its probes
// are attached; out gets its stdout, log its stderr. The caller ends it.
func startAttached(t *testing.T, pid int, args ...string) (mt *exec.Cmd, out *bytes.Buffer, log *syncBuffer) {
	t.Helper()
	mt = exec.Command(memtrace(t), append(append([]string{"-v"}, args...), "-p", strconv.Itoa(pid))...)
	out, log = &bytes.Buffer{}, &syncBuffer{}
	mt.Stdout = out
	stderr, _ := mt.StderrPipe()
	if err := mt.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mt.Process.Kill() })
	waitAttached(t, stderr, log)
	return mt, out, log
}

// waitAttached reads a `memtrace -v` stderr until its probes are attached,
// copying it to log, then keeps copying the rest in the background.
func waitAttached(t *testing.T, stderr io.Reader, log io.Writer) {
	t.Helper()
	errLines := bufio.NewReader(stderr)
	for {
		l, err := errLines.ReadString('\n')
		if err != nil {
			t.Fatalf("memtrace ended before attaching: %v\n%s", err, log)
		}
		io.WriteString(log, l)
		if strings.Contains(l, "msg=attached") {
			break
		}
	}
	go io.Copy(log, errLines)
}

// runOnSignal runs memtrace -v with args, a command that waits for a byte
// on its stdin at the point it must not pass too early, and sends that
// byte once memtrace's stderr shows line: no fixed sleep in the fixture,
// however slow the machine. It fails unless memtrace logs line and exits
// 0; the byte (or end of file) goes anyway, so the command never hangs.
func runOnSignal(t *testing.T, line string, args ...string) result {
	t.Helper()
	return runOnSignalEnv(t, nil, line, args...)
}

// runOnSignalEnv is runOnSignal with env added to memtrace's environment.
func runOnSignalEnv(t *testing.T, env []string, line string, args ...string) result {
	t.Helper()
	return runOnSignalWhen(t, env, line, func(l string) bool { return strings.Contains(l, line) }, args...)
}

// runOnSignalWhen is runOnSignalEnv sending the byte once ready has
// returned true for a line of memtrace's stderr (ready sees each line
// once, in order); what names what is awaited, for the failure.
func runOnSignalWhen(t *testing.T, env []string, what string, ready func(line string) bool, args ...string) result {
	t.Helper()
	line := what
	cmd := exec.Command(memtrace(t), append([]string{"-v"}, args...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	seen, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(errPipe)
		told := false
		for sc.Scan() {
			stderr.WriteString(sc.Text() + "\n")
			if !told && ready(sc.Text()) {
				close(seen)
				told = true
			}
		}
	}()
	found := true
	select {
	case <-seen:
	case <-done:
		found = false
	case <-time.After(testwait.Limit):
		found = false
	}
	stdin.Write([]byte{1})
	stdin.Close()
	<-done
	code := 0
	if err := cmd.Wait(); err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("run memtrace: %v", err)
		}
		code = ee.ExitCode()
	}
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !found {
		t.Fatalf("memtrace never logged %q:\n%s", line, stderr.String())
	}
	return result{stdout.String(), stderr.String(), code}
}
