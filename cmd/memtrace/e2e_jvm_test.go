package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/testwait"
)

// The JVM tests run Debian's OpenJDK 17 (openjdk-17-jdk-headless, which CI
// installs) on a class compiled here with javac.

// javaClasses compiles testdata/jvm/Idle.java (it prints "ready PID",
// then waits for a line on stdin: a JVM at rest) and returns the class
// directory; it skips (fails under CI=true) without a JDK.
func javaClasses(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"java", "javac", "jcmd"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI=true but %v: install openjdk-17-jdk-headless", err)
			}
			t.Skip(err)
		}
	}
	dir := t.TempDir()
	src := filepath.Join("..", "..", "testdata", "jvm", "Idle.java")
	if out, err := exec.Command("javac", "-d", dir, src).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	return dir
}

// jvmRecord holds the fields of process and callsite records these tests read.
type jvmRecord struct {
	Type          string `json:"type"`
	Final         bool   `json:"final"`
	Category      string `json:"category"`
	Function      string `json:"function"`
	Module        string `json:"module"`
	LiveBytes     uint64 `json:"live_bytes"`
	LiveAllocs    uint64 `json:"live_allocs"`
	Allocs        uint64 `json:"allocs"`
	JVMCategory   *string
	JVMCategories []struct {
		Name       string `json:"name"`
		LiveBytes  uint64 `json:"live_bytes"`
		LiveAllocs uint64 `json:"live_allocs"`
	} `json:"jvm_categories"`
}

func (r *jvmRecord) UnmarshalJSON(b []byte) error {
	type plain jvmRecord
	var aux struct {
		plain
		JVMCategory *string `json:"jvm_category"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*r = jvmRecord(aux.plain)
	r.JVMCategory = aux.JVMCategory
	return nil
}

// jvmWrappers are the JVM's allocation wrappers: none may be a call site.
var jvmWrappers = regexp.MustCompile(`^(os::(malloc|realloc|strdup|strdup_check_oom)|AllocateHeap|ReallocateHeap|NMTPreInitAllocation::do_alloc)\(`)

// TestJVMCallSites: on the JVM, the call sites are the JVM functions that
// asked for memory, not os::malloc and kin (98.5% of the live heap was
// charged to them before); the JVM runs as it does untraced; its heap
// sites carry their NMT category.
//
// A few allocations may still be charged to a wrapper: the walk stops at
// the allocator's caller when bpf_find_vma cannot take the process's mmap
// lock (a trylock), which the JVM's threads hold often while it starts.
// Seen here: one or two calls in a run, once 106 KiB of 7 MiB. So every
// site is read (--top 0), and wrappers may hold at most 2% of the live
// heap and of the calls.
func TestJVMCallSites(t *testing.T) {
	needBPF(t)
	dir := javaClasses(t)
	mt := exec.Command(memtrace(t), "--json", "--top", "0", "--", "java", "-cp", dir, "Idle")
	mt.Stdin = strings.NewReader("\n")
	var stdout, stderr strings.Builder
	mt.Stdout, mt.Stderr = &stdout, &stderr
	if err := mt.Run(); err != nil {
		t.Fatalf("memtrace: %v\n%s", err, stderr.String())
	}
	// What the JVM printed, between the report's lines, is what it prints untraced.
	var printed []string
	var recs []jvmRecord
	for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		if !strings.HasPrefix(l, "{") {
			printed = append(printed, strings.Fields(l)[0])
			continue
		}
		var r jvmRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		recs = append(recs, r)
	}
	if strings.Join(printed, " ") != "ready bye" {
		t.Errorf("the JVM printed %q, want ready <pid>, bye", printed)
	}
	var cats []string
	var sites []jvmRecord
	var live, calls, wrapperLive, wrapperCalls uint64
	for _, r := range recs {
		switch {
		case r.Type == "process" && r.Final:
			for _, c := range r.JVMCategories {
				cats = append(cats, c.Name)
			}
		case r.Type == "callsite" && r.Category == "heap" && r.Final:
			sites = append(sites, r)
			live, calls = live+r.LiveBytes, calls+r.Allocs
			if jvmWrappers.MatchString(r.Function) {
				t.Logf("call site %s: %d live bytes, %d calls charged to a wrapper", r.Function, r.LiveBytes, r.Allocs)
				wrapperLive, wrapperCalls = wrapperLive+r.LiveBytes, wrapperCalls+r.Allocs
			}
			if r.JVMCategory == nil {
				t.Errorf("call site %s: no jvm_category", r.Function)
			}
		}
	}
	if wrapperLive*50 > live || wrapperCalls*50 > calls {
		t.Errorf("wrappers charged with %d of %d live bytes, %d of %d calls: more than 2%%", wrapperLive, live, wrapperCalls, calls)
	}
	// The JVM's top sites by live bytes (the report's order) allocate
	// through os::malloc: they have a category. (Others are libraries':
	// libstdc++'s emergency pool, libnet's init.)
	if len(sites) < 10 {
		t.Fatalf("%d heap call sites", len(sites))
	}
	for _, r := range sites[:10] {
		if filepath.Base(r.Module) == "libjvm.so" && (r.JVMCategory == nil || *r.JVMCategory == "") {
			t.Errorf("top site %s (%s, %d live bytes) has no NMT category", r.Function, r.Module, r.LiveBytes)
		}
	}
	for _, want := range []string{"Symbol", "GC", "Class", "Internal", "Arena Chunk"} {
		found := false
		for _, c := range cats {
			found = found || c == want
		}
		if !found {
			t.Errorf("no %q in the JVM's categories %q", want, cats)
		}
	}
}

// nmtOverhead is what os::malloc adds to each block while NMT tracks it
// (Debian's OpenJDK 17: `add $0x12,%rdi` before its malloc call): a 16-byte
// MallocHeader and a 2-byte footer canary. NMT reports the sizes asked for.
const nmtOverhead = 18

// jvmCompilesDone says whether the JVM pid compiles nothing and has
// nothing queued (jcmd Compiler.queue: "Current compiles:" with no task
// under it, and each queue "Empty").
func jvmCompilesDone(pid string) bool {
	out, err := exec.Command("jcmd", pid, "Compiler.queue").Output()
	if err != nil {
		return false
	}
	queues, tasks := 0, 0
	section := ""
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasSuffix(l, ":") && !strings.Contains(l, " "):
			// a blank line, or jcmd's "PID:" header
		case strings.HasPrefix(l, "Current compiles:") || strings.HasSuffix(l, "compile queue:"):
			section = l
		case l == "Empty" && strings.HasSuffix(section, "compile queue:"):
			queues++
		case section != "":
			tasks++ // a compilation running or queued
		}
	}
	return queues >= 2 && tasks == 0
}

// TestJVMCategoriesMatchNMT compares the heap memtrace finds per NMT
// category with NMT's own summary of the same JVM at the same moment: a
// JVM at rest, summarized by `jcmd PID VM.native_memory summary`, and
// memtrace's next periodic report but one.
func TestJVMCategoriesMatchNMT(t *testing.T) {
	needBPF(t)
	dir := javaClasses(t)
	mt := exec.Command(memtrace(t), "--json", "--top", "1", "-i", "200ms", "--",
		"java", "-XX:NativeMemoryTracking=summary", "-cp", dir, "Idle")
	stdin, err := mt.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := mt.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	mt.Stderr = &stderr
	if err := mt.Start(); err != nil {
		t.Fatal(err)
	}
	defer mt.Process.Kill()
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() string {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("memtrace ended early: %s", stderr.String())
			}
			return l
		case <-time.After(60 * time.Second):
			t.Fatalf("no output for 60 s: %s", stderr.String())
		}
		return ""
	}
	pid := ""
	for pid == "" {
		if l := next(); strings.HasPrefix(l, "ready ") {
			pid = strings.TrimPrefix(l, "ready ")
		}
	}
	// At rest: its classes loaded ("ready"), its compilations done.
	testwait.For(t, "the JVM's compile queues empty", func() bool { return jvmCompilesDone(pid) })
	// The JVM is at rest, not frozen: its chunk pool's cleaner runs every
	// 5 s, a compilation may finish. A comparison that such a change fell
	// into is taken again, up to three times in all; each one is logged.
	var failures []string
	for attempt := 1; attempt <= 3; attempt++ {
		out, err := exec.Command("jcmd", pid, "VM.native_memory", "summary", "scale=b").CombinedOutput()
		if err != nil {
			t.Fatalf("jcmd: %v\n%s", err, out)
		}
		nmt := parseNMT(t, string(out))
		// A report begun after jcmd returned: the second from now.
		var proc *jvmRecord
		for reports := 0; reports < 2 || proc == nil; {
			l := next()
			if !strings.HasPrefix(l, "{") {
				continue
			}
			var r jvmRecord
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatalf("%v: %s", err, l)
			}
			switch {
			case r.Type == "report":
				reports++
			case r.Type == "process" && reports == 2:
				proc = &r
			}
		}
		table, failed, checked := compareNMT(nmt, proc)
		t.Logf("attempt %d: malloc bytes by NMT category, jcmd summary vs memtrace (live bytes - %d per block):\n%s",
			attempt, nmtOverhead, table)
		if checked < 5 {
			t.Fatalf("only %d categories of 32 KiB or more:\n%s", checked, out)
		}
		if failed == "" {
			failures = nil
			break
		}
		failures = append(failures, failed)
	}
	io.WriteString(stdin, "\n")
	stdin.Close()
	for range lines {
	}
	if err := mt.Wait(); err != nil {
		t.Fatalf("memtrace: %v\n%s", err, stderr.String())
	}
	for i, f := range failures {
		t.Errorf("attempt %d: %s", i+1, f)
	}
}

// compareNMT compares NMT's malloc bytes per category with memtrace's
// (live bytes less nmtOverhead per block): a table of every category, the
// categories of 32 KiB or more (smaller ones move by a few blocks) that
// differ by more than 5%, and how many were checked.
func compareNMT(nmt nmtSummary, proc *jvmRecord) (table, failed string, checked int) {
	got := map[string]uint64{}
	for _, c := range proc.JVMCategories {
		got[c.Name] = c.LiveBytes - nmtOverhead*c.LiveAllocs
	}
	var tb, fb strings.Builder
	for _, c := range nmt.order {
		want := nmt.malloc[c]
		if c == "Arena Chunk" {
			// NMT charges chunks in use to their arena's category (arena=),
			// and only the pool's free chunks to Arena Chunk's malloc;
			// memtrace sees every chunk malloc'ed as Arena Chunk.
			want += nmt.arena
		}
		diff := (float64(got[c]) - float64(want)) / float64(max(want, 1)) * 100
		fmt.Fprintf(&tb, "%-24s NMT %9d  memtrace %9d  %+6.2f%%\n", c, want, got[c], diff)
		if want < 32<<10 {
			continue
		}
		checked++
		if diff > 5 || diff < -5 {
			fmt.Fprintf(&fb, "%s: memtrace %d bytes, NMT %d: %+.2f%%; ", c, got[c], want, diff)
		}
	}
	return tb.String(), fb.String(), checked
}

// nmtSummary is what the test reads from NMT's summary: each category's
// malloc bytes (in NMT's order) and all arenas' bytes.
type nmtSummary struct {
	order  []string
	malloc map[string]uint64
	arena  uint64
}

var (
	nmtCategory = regexp.MustCompile(`^-\s+(.+?) \(reserved=`)
	nmtMalloc   = regexp.MustCompile(`\(malloc=(\d+) #\d+\)`)
	nmtArena    = regexp.MustCompile(`\(arena=(\d+) #\d+\)`)
)

func parseNMT(t *testing.T, out string) nmtSummary {
	t.Helper()
	s := nmtSummary{malloc: map[string]uint64{}}
	cur := ""
	for _, l := range strings.Split(out, "\n") {
		if m := nmtCategory.FindStringSubmatch(l); m != nil {
			cur = m[1]
			continue
		}
		if m := nmtMalloc.FindStringSubmatch(l); m != nil && cur != "" {
			n, _ := strconv.ParseUint(m[1], 10, 64)
			s.malloc[cur] = n
			s.order = append(s.order, cur)
		}
		if m := nmtArena.FindStringSubmatch(l); m != nil && cur != "" {
			n, _ := strconv.ParseUint(m[1], 10, 64)
			s.arena += n
		}
	}
	if len(s.order) == 0 {
		t.Fatalf("no NMT categories in:\n%s", out)
	}
	return s
}

// TestJVMDlopened: a launcher that is not a JDK's bin/java dlopens
// libjvm.so; memtrace places the category probes at dlopen's return. The
// JVM's first allocations, before they are in, have no category: the test
// asks only that categories come out, and that the launcher runs as it
// does untraced. The launcher loads more classes only once memtrace says
// the probes are in (a byte on its stdin): under the full suite's load,
// the probes once came in after a JVM that had already finished (all of
// its 5287 blocks without a category).
func TestJVMDlopened(t *testing.T) {
	needBPF(t)
	javaClasses(t) // a JDK, or skip
	java, err := exec.LookPath("java")
	if err != nil {
		t.Fatal(err)
	}
	if java, err = filepath.EvalSymlinks(java); err != nil {
		t.Fatal(err)
	}
	jdk := filepath.Dir(filepath.Dir(java))
	embed := fixture(t, "jvm/embed.c", "-I"+filepath.Join(jdk, "include"), "-I"+filepath.Join(jdk, "include", "linux"), "-ldl")
	r := runOnSignal(t, `msg="JVM category probes"`, "--json", "--top", "1", "--", embed, filepath.Join(jdk, "lib", "server", "libjvm.so"))
	named := 0
	printed := ""
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if !strings.HasPrefix(l, "{") {
			printed += l
			continue
		}
		var rec jvmRecord
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		for _, c := range rec.JVMCategories {
			if c.Name != "" && rec.Final {
				named++
			}
		}
	}
	if printed != "found" {
		t.Errorf("the launcher printed %q, want found", printed)
	}
	if named == 0 {
		t.Errorf("no NMT category:\n%s", r.stdout)
	}
}
