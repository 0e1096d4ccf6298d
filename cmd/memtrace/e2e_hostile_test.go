package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/textsafe"
)

// The names of testdata/hostile_names.c: it renames itself to hostileName
// (escape sequences and a byte that is not UTF-8) and runs from a file of
// that name; its marks hold HTML and escape sequences. No text memtrace
// writes may carry them to the terminal (docs/security.md).
const hostileName = "\x1b]0;PWN\x07\x1b[2J\xff"

// hostileShown is hostileName as memtrace prints it.
var hostileShown = textsafe.String(hostileName)

// noControls fails if out holds a control character other than newline
// and tab: C0, DEL, or C1 in its UTF-8 form.
func noControls(t *testing.T, what, out string) {
	t.Helper()
	for i := 0; i < len(out); i++ {
		c := out[i]
		if (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f || (c == 0xc2 && i+1 < len(out) && out[i+1] >= 0x80 && out[i+1] < 0xa0) {
			start := max(0, i-60)
			t.Errorf("%s: control byte %#x at %d, in %q", what, c, i, out[start:min(len(out), i+20)])
			return
		}
	}
}

// hostileCopy copies the fixture into a new directory under hostileName.
func hostileCopy(t *testing.T) (dir, exe string) {
	t.Helper()
	dir = t.TempDir()
	exe = filepath.Join(dir, hostileName)
	copyFile(t, fixture(t, "hostile_names.c"), exe) // e2e_host_test.go
	return dir, exe
}

// TestHostileNames: under --, then in a replay of its recording, and in
// the whole-host mode, the text memtrace writes (stdout and stderr) holds
// no control character, the names show escaped, and the HTML page keeps
// its own title.
func TestHostileNames(t *testing.T) {
	needBPF(t)
	dir, exe := hostileCopy(t)
	rec, page, stacks := filepath.Join(dir, "run.rec"), filepath.Join(dir, "page.html"), filepath.Join(dir, "stacks.folded")

	r := runMemtrace(t, "--leak-check", "--mark", "memtrace_mark", "--record", rec, "--html", page,
		"--folded", stacks, "--", exe)
	if r.code != 0 {
		t.Fatalf("memtrace exited %d:\n%s", r.code, r.stderr)
	}
	noControls(t, "-- stdout", r.stdout)
	noControls(t, "-- stderr", r.stderr)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^pid \d+ ` + regexp.QuoteMeta(hostileShown) + ` \(exited\)$`),
		regexp.MustCompile(`(?m)^pid \d+ ` + regexp.QuoteMeta(hostileShown) + `: leak check at exit$`),
		regexp.MustCompile(`(?m)hostile_alloc +\S+ +` + regexp.QuoteMeta(hostileShown) + `$`),
		regexp.MustCompile(`(?m)^ +#1 "<script>alert\(1\)</script></title><title>PWN" at`),
		regexp.MustCompile(`(?m)^ +#3 "tab\\there" at`),
	} {
		if !want.MatchString(r.stdout) {
			t.Errorf("-- report: no match for %s in:\n%s", want, r.stdout)
		}
	}

	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	html := string(b)
	if n, m := strings.Count(html, "<title>"), strings.Count(html, "</title>"); n != 1 || m != 1 {
		t.Errorf("--html: %d <title> and %d </title>, want its own one", n, m)
	} else if title := html[strings.Index(html, "<title>")+7 : strings.Index(html, "</title>")]; !strings.HasPrefix(title, "memtrace ") || strings.ContainsAny(title, "<>\x1b\x07") {
		t.Errorf("--html: title %q", title)
	}
	if strings.Contains(html, "<script>alert(1)") {
		t.Error("--html: the mark's <script> is in the page unescaped")
	}

	b, err = os.ReadFile(stacks)
	if err != nil {
		t.Fatal(err)
	}
	noControls(t, "--folded", string(b))
	line := regexp.MustCompile(`^[^;]+(;[^;]+)* \d+$`)
	for l := range strings.Lines(string(b)) {
		if !line.MatchString(strings.TrimSuffix(l, "\n")) {
			t.Errorf("--folded: line %q", l)
		}
	}

	t.Run("json", func(t *testing.T) {
		r := runMemtrace(t, "--json", "--", exe)
		if r.code != 0 {
			t.Fatalf("memtrace exited %d:\n%s", r.code, r.stderr)
		}
		noControls(t, "--json stdout", r.stdout)
		// The comm is the process's, JSON-escaped; its byte that is not
		// UTF-8 is U+FFFD, as encoding/json writes it.
		if p := parseNDJSON(t, r.stdout).finalProcess(t); p.Comm != strings.ToValidUTF8(hostileName, "\uFFFD") {
			t.Errorf("comm %q in the JSON", p.Comm)
		}
	})

	t.Run("replay", func(t *testing.T) {
		r := runMemtrace(t, "replay", rec)
		if r.code != 0 {
			t.Fatalf("replay exited %d:\n%s", r.code, r.stderr)
		}
		noControls(t, "replay stdout", r.stdout)
		noControls(t, "replay stderr", r.stderr)
		if !strings.Contains(r.stdout, " "+hostileShown+" ") {
			t.Errorf("replay: no %q in:\n%s", hostileShown, r.stdout)
		}
	})

	t.Run("host", func(t *testing.T) {
		out, errs := runHostHostile(t)
		noControls(t, "whole-host stdout", out)
		noControls(t, "whole-host stderr", errs)
		if !strings.Contains(out, " "+hostileShown) {
			t.Errorf("whole host: no %q in:\n%s", hostileShown, out)
		}
	})
}

// runHostHostile runs the fixture chroot'ed on its own copy of libc under
// hostileName while a whole-host memtrace (text, --comm) traces it, and
// returns memtrace's stdout and stderr.
func runHostHostile(t *testing.T) (stdout, stderr string) {
	t.Helper()
	root := chrootWithOwnLibc(t, fixture(t, "hostile_names.c"), hostileName) // e2e_host_test.go
	waitReapers(t)                                                           // e2e_kernel_test.go
	mt := exec.Command(memtrace(t), "-v", "--heap", "--sample-bytes", "0", "--comm", hostileName)
	var out strings.Builder
	mt.Stdout = &out
	pipe, _ := mt.StderrPipe()
	if err := mt.Start(); err != nil {
		t.Fatal(err)
	}
	defer mt.Process.Kill()
	log := make(chan string, 1<<12)
	var errs strings.Builder
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			log <- sc.Text()
		}
		close(log)
	}()
	waitLog := func(s string) {
		t.Helper()
		timeout := time.After(60 * time.Second)
		for {
			select {
			case l, ok := <-log:
				if !ok {
					t.Fatalf("memtrace ended before logging %q:\n%s", s, errs.String())
				}
				errs.WriteString(l + "\n")
				if strings.Contains(l, s) {
					return
				}
			case <-timeout:
				t.Fatalf("memtrace did not log %q:\n%s", s, errs.String())
			}
		}
	}
	waitLog("msg=attached")

	fx := exec.Command("chroot", root, "/"+hostileName, "wait")
	stdin, _ := fx.StdinPipe()
	fxOut, _ := fx.StdoutPipe()
	if err := fx.Start(); err != nil {
		t.Fatal(err)
	}
	expectLine(t, bufio.NewReader(fxOut), "ready")
	waitLog("msg=probed pid=" + strconv.Itoa(fx.Process.Pid))
	stdin.Close()
	if err := fx.Wait(); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	mt.Process.Signal(syscall.SIGINT)
	for l := range log {
		errs.WriteString(l + "\n")
	}
	if err := mt.Wait(); err != nil {
		t.Fatalf("memtrace: %v\n%s", err, errs.String())
	}
	return out.String(), errs.String()
}

// TestHostilePrometheus: a real Prometheus scrapes memtrace --listen while
// it traces the fixture: the comm with escapes and a byte that is not
// UTF-8 arrives, escaped, as a label value (client_golang refused it,
// and memtrace's scrape handler panicked).
func TestHostilePrometheus(t *testing.T) {
	needBPF(t)
	promBin := needPrometheus(t) // e2e_prometheus_test.go
	dir, exe := hostileCopy(t)
	mtAddr := freePort(t)
	mt, stdin := startListening(t, mtAddr, "-o", filepath.Join(dir, "report.txt"), "--", exe, "wait")
	promAddr, promLog := startPrometheus(t, promBin, dir, mtAddr)
	got := promWait(t, promAddr, promLog, "a series of hostile_alloc in Prometheus", `memtrace_callsite_live_bytes{function="hostile_alloc"}`,
		func(r []promSample) bool { return len(r) == 1 })
	if got[0].labels["comm"] != hostileShown || got[0].labels["module"] != hostileShown {
		t.Errorf("labels %q, want comm and module %q", got[0].labels, hostileShown)
	}
	if up := promQuery(t, promAddr, `up{job="memtrace"}`); len(up) != 1 || up[0].value != 1 {
		t.Errorf("up = %v, want 1", up)
	}
	stdin.Close()
	if err := mt.Wait(); err != nil {
		t.Fatalf("memtrace: %v", err)
	}
}
