package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/testwait"
)

// These tests fetch a stripped fixture's debug file from Debian's
// debuginfod server (package debuginfod) on loopback, as gdb would, and
// check that names, files, lines and inline chains come out exact.

// startDebuginfod serves the debug files in dir with Debian's debuginfod on
// a free loopback port, and returns its URL once it serves id.
func startDebuginfod(t *testing.T, dir, id string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	var log bytes.Buffer
	cmd := exec.Command("debuginfod", "-F", "-d", filepath.Join(t.TempDir(), "db.sqlite"), "-p", fmt.Sprint(port), dir)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")} // no DEBUGINFOD_URLS: it must not ask others
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("debuginfod:\n%s", log.String())
		}
	})
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	// It serves once it has scanned dir.
	testwait.For(t, "debuginfod to serve "+id, func() bool {
		resp, err := http.Get(url + "/buildid/" + id + "/debuginfo")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return url
}

// runMemtraceEnv is runMemtrace with env added to memtrace's environment
// (DEBUGINFOD_* variables of the test's own removed).
func runMemtraceEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(memtrace(t), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DEBUGINFOD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	return runCmd(t, cmd)
}

// stripForDebuginfod builds the fixture run: a stripped copy of bin, and
// its debug file in a directory of its own for the server.
func stripForDebuginfod(t *testing.T, bin string) (run, serveDir, id string) {
	t.Helper()
	dir := t.TempDir()
	serveDir = filepath.Join(dir, "serve")
	if err := os.Mkdir(serveDir, 0o755); err != nil {
		t.Fatal(err)
	}
	tool(t, "objcopy", "--only-keep-debug", bin, filepath.Join(serveDir, "prog.debug"))
	run = filepath.Join(dir, "prog")
	tool(t, "strip", "--strip-all", "-o", run, bin)
	return run, serveDir, buildIDOf(t, bin)
}

// TestDebuginfod: each fixture, stripped, through memtrace --json with
// DEBUGINFOD_URLS naming the loopback server: the first run downloads the
// debug file into the cache, the second finds it there; both resolve
// exactly as the unstripped binary does.
func TestDebuginfod(t *testing.T) {
	needBPF(t)
	needTools(t, "objcopy", "strip", "readelf", "debuginfod")
	for _, fx := range symFixtures {
		t.Run(fx.src, func(t *testing.T) {
			lines := siteLines(t, fx.src)
			var bin string
			if fx.cxx {
				bin = fixtureCXX(t, fx.src, "-fPIE", "-pie", "-fomit-frame-pointer")
			} else {
				bin = fixture(t, fx.src, "-fPIE", "-pie", "-fomit-frame-pointer")
			}
			run, serveDir, id := stripForDebuginfod(t, bin)
			url := startDebuginfod(t, serveDir, id)
			cache := filepath.Join(t.TempDir(), "cache")
			env := []string{"DEBUGINFOD_URLS=" + url, "DEBUGINFOD_CACHE_PATH=" + cache}
			// No debug directory: only the server has the debug file.
			args := []string{"-v", "--debug-dir", emptyDir(t, t.TempDir()), "--json", "--top", "0", "--", run}
			cached := filepath.Join(cache, id, "debuginfo")
			for _, step := range []struct{ name, log string }{
				{"download", `msg="debuginfod: fetched" build_id=` + id + ` url=` + url + ` bytes=\d+ took=\S+ path=` + regexp.QuoteMeta(cached)},
				{"from the cache", `msg="debuginfod: in the cache" build_id=` + id + ` path=` + regexp.QuoteMeta(cached)},
			} {
				r := runMemtraceEnv(t, env, args...)
				if r.code != 0 {
					t.Fatalf("%s: exit %d: %s", step.name, r.code, r.stderr)
				}
				if !regexp.MustCompile(step.log).MatchString(r.stderr) {
					t.Errorf("%s: -v does not say /%s/:\n%s", step.name, step.log, r.stderr)
				}
				checkSymSites(t, fx, lines, run, true, parseSymSites(t, r.stdout))
			}
			want, _ := os.ReadFile(filepath.Join(serveDir, "prog.debug"))
			if got, err := os.ReadFile(cached); err != nil || !bytes.Equal(got, want) {
				t.Errorf("the cache does not hold the served debug file (%v)", err)
			}

			// --no-debuginfod: the stripped binary has no names.
			r := runMemtraceEnv(t, env, append([]string{"--no-debuginfod"}, args...)...)
			if r.code != 0 {
				t.Fatalf("--no-debuginfod: exit %d: %s", r.code, r.stderr)
			}
			if strings.Contains(r.stderr, "debuginfod") {
				t.Errorf("--no-debuginfod still logs debuginfod:\n%s", r.stderr)
			}
			for _, s := range parseSymSites(t, r.stdout) {
				if s.Module == run && (s.Function != "" || s.File != "") {
					t.Errorf("--no-debuginfod: site named %q at %s:%d", s.Function, s.File, s.Line)
				}
			}
		})
	}
}

// TestDebuginfodLeakRecords: the leak check's loss records, resolved when
// the command stops at its exit, are named from the downloaded file too.
func TestDebuginfodLeakRecords(t *testing.T) {
	needBPF(t)
	needTools(t, "objcopy", "strip", "readelf", "debuginfod")
	lines := siteLines(t, "inlined.c")
	run, serveDir, id := stripForDebuginfod(t, fixture(t, "inlined.c", "-fPIE", "-pie"))
	url := startDebuginfod(t, serveDir, id)
	env := []string{"DEBUGINFOD_URLS=" + url, "DEBUGINFOD_CACHE_PATH=" + filepath.Join(t.TempDir(), "cache")}
	r := runMemtraceEnv(t, env, "--debug-dir", emptyDir(t, t.TempDir()), "--", run)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	want := fmt.Sprintf(`(?m)^  40 bytes in 1 blocks are definitely lost\n\s+at leak_static  \S*inlined.c:%d  prog$`, lines["leak_static"])
	if n := len(regexp.MustCompile(want).FindAllString(r.stdout, -1)); n != 2 {
		t.Errorf("%d loss records /%s/, want 2:\n%s", n, want, r.stdout)
	}
}

// TestDebuginfodOffline: a server that cannot be reached slows a run once:
// the run reports as without debuginfod, says so, and remembers the miss,
// so the next run does not ask.
func TestDebuginfodOffline(t *testing.T) {
	needBPF(t)
	needTools(t, "objcopy", "strip", "readelf")
	run, _, id := stripForDebuginfod(t, fixture(t, "inlined.c", "-fPIE", "-pie"))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	l.Close() // nothing listens: connection refused
	cache := filepath.Join(t.TempDir(), "cache")
	env := []string{"DEBUGINFOD_URLS=" + url, "DEBUGINFOD_CACHE_PATH=" + cache}
	args := []string{"-v", "--debug-dir", emptyDir(t, t.TempDir()), "--json", "--top", "0", "--", run}
	for _, step := range []struct{ name, log string }{
		{"unreachable", `level=WARN msg="debuginfod: server unreachable, not asked again in this run" url=` + url},
		{"cached miss", `msg="debuginfod: cached miss" build_id=` + id},
	} {
		r := runMemtraceEnv(t, env, args...)
		if r.code != 0 {
			t.Fatalf("%s: exit %d: %s", step.name, r.code, r.stderr)
		}
		if !regexp.MustCompile(step.log).MatchString(r.stderr) {
			t.Errorf("%s: -v does not say /%s/:\n%s", step.name, step.log, r.stderr)
		}
		if fi, err := os.Stat(filepath.Join(cache, id, "debuginfo")); err != nil || fi.Size() != 0 {
			t.Errorf("%s: no cached miss (%v)", step.name, err)
		}
		n := 0
		for _, s := range parseSymSites(t, r.stdout) {
			if s.Module == run {
				n++
			}
		}
		if n != 4 {
			t.Errorf("%s: %d call sites in the fixture, want 4", step.name, n)
		}
	}
}

// TestDebuginfodReplay: a run recorded without debuginfod is replayed with
// it: the replay downloads the debug file and resolves exactly.
func TestDebuginfodReplay(t *testing.T) {
	needBPF(t)
	needTools(t, "objcopy", "strip", "readelf", "debuginfod")
	fx := symFixtures[0]
	lines := siteLines(t, fx.src)
	run, serveDir, id := stripForDebuginfod(t, fixture(t, fx.src, "-fPIE", "-pie"))
	url := startDebuginfod(t, serveDir, id)
	rec := filepath.Join(t.TempDir(), "run.mtr")
	noDebug := emptyDir(t, t.TempDir())
	if r := runMemtraceEnv(t, nil, "--no-debuginfod", "--debug-dir", noDebug, "--record", rec, "--", run); r.code != 0 {
		t.Fatalf("record: exit %d: %s", r.code, r.stderr)
	}
	env := []string{"DEBUGINFOD_URLS=" + url, "DEBUGINFOD_CACHE_PATH=" + filepath.Join(t.TempDir(), "cache")}
	r := runMemtraceEnv(t, env, "replay", "--debug-dir", noDebug, "--json", "--top", "0", rec)
	if r.code != 0 {
		t.Fatalf("replay: exit %d: %s", r.code, r.stderr)
	}
	checkSymSites(t, fx, lines, run, true, parseSymSites(t, r.stdout))
}

// TestDebuginfodWait: a server that accepts and never answers holds the
// reports back for --debuginfod-wait in all, or until Ctrl-C; then they
// come out without the file, and memtrace exits as usual.
func TestDebuginfodWait(t *testing.T) {
	needBPF(t)
	needTools(t, "objcopy", "strip", "readelf")
	run, _, _ := stripForDebuginfod(t, fixture(t, "inlined.c", "-fPIE", "-pie"))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	env := []string{"DEBUGINFOD_URLS=http://" + l.Addr().String(), "DEBUGINFOD_TIMEOUT=600",
		"DEBUGINFOD_CACHE_PATH=" + filepath.Join(t.TempDir(), "cache")}
	noDebug := emptyDir(t, t.TempDir())
	sites := func(t *testing.T, out string) {
		t.Helper()
		n := 0
		for _, s := range parseSymSites(t, out) {
			if s.Module == run {
				n++
				if s.Function != "" {
					t.Errorf("site named %q without its debug file", s.Function)
				}
			}
		}
		if n != 4 {
			t.Errorf("%d call sites in the fixture, want 4", n)
		}
	}

	t.Run("bounded", func(t *testing.T) {
		// Leak check at exit and final report: one budget for both.
		r := runMemtraceEnv(t, env, "-v", "--debuginfod-wait", "1s", "--debug-dir", noDebug, "--json", "--top", "0", "--", run)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		waits := regexp.MustCompile(`msg="debuginfod: waiting for downloads" pending=\d+ at_most=`).FindAllString(r.stderr, -1)
		if len(waits) != 1 || !regexp.MustCompile(`level=WARN msg="debuginfod: downloads unfinished, reported without them \(--debuginfod-wait waits longer\)" left=\d+ waited=1s\n`).MatchString(r.stderr) {
			t.Errorf("want one wait of 1s, then the warning:\n%s", r.stderr)
		}
		sites(t, r.stdout)
	})
	t.Run("Ctrl-C", func(t *testing.T) {
		cmd := exec.Command(memtrace(t), "-v", "--debuginfod-wait", "10m", "--debug-dir", noDebug, "--json", "--top", "0", "--", run)
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "DEBUGINFOD_") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, env...)
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var log strings.Builder
		buf := make([]byte, 4096)
		for !strings.Contains(log.String(), `msg="debuginfod: waiting for downloads"`) {
			n, err := stderr.Read(buf)
			log.Write(buf[:n])
			if err != nil {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("memtrace ended before waiting: %v\n%s", err, log.String())
			}
		}
		cmd.Process.Signal(os.Interrupt)
		rest := make(chan string)
		go func() {
			var b bytes.Buffer
			b.ReadFrom(stderr)
			rest <- b.String()
		}()
		select {
		case s := <-rest:
			log.WriteString(s)
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("memtrace still waits after Ctrl-C:\n%s", log.String())
		}
		err = cmd.Wait()
		if err != nil {
			t.Fatalf("memtrace: %v\n%s", err, log.String())
		}
		if !strings.Contains(log.String(), `level=WARN msg="debuginfod: waiting for downloads interrupted, reported without them" signal=interrupt`) {
			t.Errorf("no warning of the interrupted wait:\n%s", log.String())
		}
		sites(t, stdout.String())
	})
}

// TestDebuginfodAttached: with -p, the download starts when memtrace reads
// the running process's mappings, while it traces; the report that ends
// the run names the stripped program's call site exactly.
func TestDebuginfodAttached(t *testing.T) {
	needBPF(t)
	needTools(t, "objcopy", "strip", "readelf", "debuginfod")
	run, serveDir, id := stripForDebuginfod(t, fixture(t, "running.c"))
	url := startDebuginfod(t, serveDir, id)
	line := 0
	src, err := os.ReadFile(filepath.Join("..", "..", "testdata", "running.c"))
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(src), "\n") {
		if strings.Contains(l, "sink = malloc(1000);") {
			line = i + 1
		}
	}
	target, stdin, lines := startReady(t, run)
	defer target.Process.Kill()
	cmd := exec.Command(memtrace(t), "-v", "--debug-dir", emptyDir(t, t.TempDir()), "--json", "--top", "0", "-p", fmt.Sprint(target.Process.Pid))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DEBUGINFOD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "DEBUGINFOD_URLS="+url, "DEBUGINFOD_CACHE_PATH="+filepath.Join(t.TempDir(), "cache"))
	var stdout bytes.Buffer
	var log syncBuffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitAttached(t, stderr, &log)
	fmt.Fprintln(stdin, "go")
	expectLine(t, lines, "done")
	fmt.Fprintln(stdin, "exit")
	target.Wait()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("memtrace: %v\n%s", err, log.String())
	}
	if !regexp.MustCompile(`msg="debuginfod: fetched" build_id=` + id).MatchString(log.String()) {
		t.Errorf("-v does not say the file was fetched:\n%s", log.String())
	}
	found := false
	for _, s := range parseSymSites(t, stdout.String()) {
		if s.Module != run {
			continue
		}
		if s.Function == "leak_after" && filepath.Base(s.File) == "running.c" && s.Line == line && s.Allocs == 5 && s.AllocBytes == 5000 {
			found = true
			continue
		}
		t.Errorf("call site %s at %s:%d (%d allocs of %d bytes)", s.Function, s.File, s.Line, s.Allocs, s.AllocBytes)
	}
	if !found {
		t.Errorf("no call site leak_after at running.c:%d with 5 allocs of 5000 bytes:\n%s", line, stdout.String())
	}
}

// syncBuffer is a bytes.Buffer safe for a writer goroutine and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
