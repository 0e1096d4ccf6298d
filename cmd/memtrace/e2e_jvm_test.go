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
)

// The JVM tests run Debian's OpenJDK 17 (openjdk-17-jdk-headless, which CI
// installs) on a class compiled here with javac.

// idleJava prints its pid, then waits for a line on stdin: a JVM at rest,
// for as long as the test needs.
const idleJava = `public class Idle {
    public static void main(String[] a) throws Exception {
        System.out.println("ready " + ProcessHandle.current().pid());
        System.out.flush();
        System.in.read();
        System.out.println("bye");
    }
}
`

// javaClasses compiles idleJava and returns the class directory; it skips
// (fails under CI=true) without a JDK.
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
	src := filepath.Join(dir, "Idle.java")
	if err := os.WriteFile(src, []byte(idleJava), 0o644); err != nil {
		t.Fatal(err)
	}
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

// TestJVMCallSites: on the JVM, the top call sites are the JVM functions
// that asked for memory, never os::malloc and kin; the JVM runs as it does
// untraced; its heap sites carry their NMT category.
func TestJVMCallSites(t *testing.T) {
	needBPF(t)
	dir := javaClasses(t)
	mt := exec.Command(memtrace(t), "--json", "--top", "30", "--", "java", "-cp", dir, "Idle")
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
	sites, categorized := 0, 0
	var cats []string
	for _, r := range recs {
		switch {
		case r.Type == "process" && r.Final:
			for _, c := range r.JVMCategories {
				cats = append(cats, c.Name)
			}
		case r.Type == "callsite" && r.Category == "heap":
			sites++
			if jvmWrappers.MatchString(r.Function) {
				t.Errorf("call site %s (%d live bytes): a wrapper is charged", r.Function, r.LiveBytes)
			}
			if r.JVMCategory == nil {
				t.Errorf("call site %s: no jvm_category", r.Function)
			} else if *r.JVMCategory != "" {
				categorized++
			}
		}
	}
	if sites != 30 {
		t.Errorf("%d heap call sites, want 30", sites)
	}
	// Most of the top sites are the JVM's own, through os::malloc.
	if categorized < 20 {
		t.Errorf("%d of 30 top sites have an NMT category, want at least 20", categorized)
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
	time.Sleep(2 * time.Second) // at rest: class loading and compilations done
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
	io.WriteString(stdin, "\n")
	stdin.Close()
	for range lines {
	}
	if err := mt.Wait(); err != nil {
		t.Fatalf("memtrace: %v\n%s", err, stderr.String())
	}
	got := map[string]uint64{}
	var table strings.Builder
	for _, c := range proc.JVMCategories {
		got[c.Name] = c.LiveBytes - nmtOverhead*c.LiveAllocs
	}
	checked := 0
	for _, c := range nmt.order {
		want := nmt.malloc[c]
		if c == "Arena Chunk" {
			// NMT charges chunks in use to their arena's category (arena=),
			// and only the pool's free chunks to Arena Chunk's malloc;
			// memtrace sees every chunk malloc'ed as Arena Chunk.
			want += nmt.arena
		}
		diff := (float64(got[c]) - float64(want)) / float64(max(want, 1)) * 100
		fmt.Fprintf(&table, "%-24s NMT %9d  memtrace %9d  %+6.2f%%\n", c, want, got[c], diff)
		// Small categories move by a few blocks at rest: 5% holds above 32 KiB.
		if want < 32<<10 {
			continue
		}
		checked++
		if diff > 5 || diff < -5 {
			t.Errorf("%s: memtrace %d bytes, NMT %d: %+.2f%%", c, got[c], want, diff)
		}
	}
	t.Logf("malloc bytes by NMT category, jcmd summary vs memtrace (live bytes - %d per block):\n%s", nmtOverhead, table.String())
	if checked < 5 {
		t.Errorf("only %d categories of 32 KiB or more:\n%s", checked, out)
	}
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
