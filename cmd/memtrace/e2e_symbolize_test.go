package main

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/arch/x86/x86asm"
)

// These tests check symbolization through the real binary: C and C++
// fixtures built -O2 -g, with and without frame pointers, PIE and not, run
// as built, stripped with only MiniDebugInfo left, stripped with a separate
// debug file found by build-id (--debug-dir) and stripped with a
// .gnu_debuglink. Every leak must be charged to its function, at the file
// and line of the call, with the inline chain of the call when it is in
// inlined code, and `offset` must be the call instruction.

// symInline is one element of an "inlined" array.
type symInline struct {
	Function string `json:"function"`
	File     string `json:"file"`
	Line     int    `json:"line"`
}

// symSite holds the callsite fields these tests check.
type symSite struct {
	Type       string      `json:"type"`
	Category   string      `json:"category"`
	Function   string      `json:"function"`
	File       string      `json:"file"`
	Line       int         `json:"line"`
	Module     string      `json:"module"`
	Address    string      `json:"address"`
	Offset     string      `json:"offset"`
	Final      bool        `json:"final"`
	Allocs     uint64      `json:"allocs"`
	AllocBytes uint64      `json:"alloc_bytes"`
	Inlined    []symInline `json:"inlined"`
	Stack      []struct {
		Function string      `json:"function"`
		File     string      `json:"file"`
		Line     int         `json:"line"`
		Inlined  []symInline `json:"inlined"`
	} `json:"stack"`
}

func parseSymSites(t *testing.T, out string) []symSite {
	t.Helper()
	var sites []symSite
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var s symSite
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("stdout line is not JSON: %v: %q", err, sc.Text())
		}
		if s.Type == "callsite" && s.Final {
			if s.Inlined == nil {
				t.Errorf("callsite without an inlined array: %s", sc.Text())
			}
			sites = append(sites, s)
		}
	}
	return sites
}

// symWant is what one function's call sites must show.
type symWant struct {
	allocs, bytes uint64
	site          string      // @site tag of the call's line
	chain         []symInline // inline chain (lines as @site tags), nil if none
}

// symFixture is a fixture source and what its leaks must resolve to.
type symFixture struct {
	src   string
	cxx   bool
	wants map[string]symWant
}

var symFixtures = []symFixture{
	{src: "inlined.c", wants: map[string]symWant{
		"leak_inlined": {allocs: 1, bytes: 32, site: "make_buffer", chain: []symInline{
			{Function: "make_buffer", File: "inlined.c", Line: 0}, // Line: filled from the @site tags
			{Function: "wrap_buffer", File: "inlined.c"},
			{Function: "leak_inlined", File: "inlined.c"},
		}},
		"leak_static": {allocs: 2, bytes: 80, site: "leak_static"},
		"leak_direct": {allocs: 1, bytes: 56, site: "leak_direct"},
	}},
	{src: "inlined.cc", cxx: true, wants: map[string]symWant{
		"leak_template()": {allocs: 1, bytes: 32, site: "grab", chain: []symInline{
			{Function: "store::Pool<long>::grab(unsigned long)", File: "inlined.cc"},
			{Function: "leak_template()", File: "inlined.cc"},
		}},
		"inventory::Table<std::pair<int, long>, std::pair<unsigned int, double> >::insert(std::pair<int, long>, std::pair<unsigned int, double>)": {
			allocs: 1, bytes: 32, site: "insert"},
		"(anonymous namespace)::leak_local()": {allocs: 1, bytes: 72, site: "leak_local"},
	}},
}

// chainTags are the @site tags of each inline chain element, in order.
var chainTags = map[string][]string{
	"inlined.c":  {"make_buffer", "wrap_buffer", "leak_inlined"},
	"inlined.cc": {"grab", "leak_template"},
}

var symBuilds = []struct {
	name  string
	flags []string
}{
	{"pie-fp", []string{"-fPIE", "-pie", "-fno-omit-frame-pointer"}},
	{"pie-nofp", []string{"-fPIE", "-pie", "-fomit-frame-pointer"}},
	{"nopie-fp", []string{"-fno-pie", "-no-pie", "-fno-omit-frame-pointer"}},
	{"nopie-nofp", []string{"-fno-pie", "-no-pie", "-fomit-frame-pointer"}},
}

// symVariant turns a built fixture into what is run: the binary and the
// --debug-dir arguments. lines: file:line and inline chains resolve (not
// only names).
type symVariant struct {
	name  string
	lines bool
	make  func(t *testing.T, bin, dir string) (run string, args []string)
}

var symVariants = []symVariant{
	{"unstripped", true, func(t *testing.T, bin, dir string) (string, []string) {
		return bin, []string{"--debug-dir", emptyDir(t, dir)}
	}},
	{"stripped-minidebuginfo", false, func(t *testing.T, bin, dir string) (string, []string) {
		return withMiniDebugInfo(t, bin, dir), []string{"--debug-dir", emptyDir(t, dir)}
	}},
	{"stripped-build-id", true, func(t *testing.T, bin, dir string) (string, []string) {
		debugDir := filepath.Join(dir, "debug")
		id := buildIDOf(t, bin)
		dbg := filepath.Join(debugDir, ".build-id", id[:2], id[2:]+".debug")
		if err := os.MkdirAll(filepath.Dir(dbg), 0o755); err != nil {
			t.Fatal(err)
		}
		tool(t, "objcopy", "--only-keep-debug", bin, dbg)
		run := filepath.Join(dir, "prog")
		tool(t, "strip", "--strip-all", "-o", run, bin)
		return run, []string{"--debug-dir", emptyDir(t, dir), "--debug-dir", debugDir}
	}},
	{"stripped-debuglink", true, func(t *testing.T, bin, dir string) (string, []string) {
		// The debug file in the .debug/ subdirectory of the binary's.
		if err := os.MkdirAll(filepath.Join(dir, ".debug"), 0o755); err != nil {
			t.Fatal(err)
		}
		dbg := filepath.Join(dir, ".debug", "prog.debug")
		tool(t, "objcopy", "--only-keep-debug", bin, dbg)
		run := filepath.Join(dir, "prog")
		tool(t, "strip", "--strip-all", "-o", run, bin)
		// objcopy looks for the file named here to compute its CRC.
		tool(t, "objcopy", "--add-gnu-debuglink="+dbg, run)
		return run, []string{"--debug-dir", emptyDir(t, dir)}
	}},
}

// TestSymbolizeVariants: each fixture, build and variant, through memtrace
// --json.
func TestSymbolizeVariants(t *testing.T) {
	needBPF(t)
	needTools(t, "objcopy", "strip", "nm", "xz")
	for _, fx := range symFixtures {
		lines := siteLines(t, fx.src)
		for _, b := range symBuilds {
			var bin string
			if fx.cxx {
				bin = fixtureCXX(t, fx.src, b.flags...)
			} else {
				bin = fixture(t, fx.src, b.flags...)
			}
			for _, v := range symVariants {
				t.Run(fx.src+"/"+b.name+"/"+v.name, func(t *testing.T) {
					dir := t.TempDir()
					run, args := v.make(t, bin, dir)
					args = append(args, "--json", "--top", "0", "--", run)
					r := runMemtrace(t, args...)
					if r.code != 0 {
						t.Fatalf("exit %d: %s", r.code, r.stderr)
					}
					checkSymSites(t, fx, lines, run, v.lines, parseSymSites(t, r.stdout))
				})
			}
		}
	}
}

// checkSymSites checks the fixture's call sites in a run of binary run.
func checkSymSites(t *testing.T, fx symFixture, lines map[string]int, run string, withLines bool, sites []symSite) {
	t.Helper()
	type total struct{ allocs, bytes uint64 }
	got := map[string]total{}
	for _, s := range sites {
		if s.Module != run {
			continue
		}
		w, ok := fx.wants[s.Function]
		if !ok {
			t.Errorf("call site charged to %q (%s:%d), not to a leaking function", s.Function, s.File, s.Line)
			continue
		}
		g := got[s.Function]
		g.allocs += s.Allocs
		g.bytes += s.AllocBytes
		got[s.Function] = g

		wantFile, wantLine := "", 0
		var wantChain []symInline
		if withLines {
			wantFile, wantLine = fx.src, lines[w.site]
			for i, c := range w.chain {
				c.Line = lines[chainTags[fx.src][i]]
				wantChain = append(wantChain, c)
			}
		}
		if filepath.Base(s.File) != wantFile && !(wantFile == "" && s.File == "") || s.Line != wantLine {
			t.Errorf("%s: at %s:%d, want %s:%d", s.Function, s.File, s.Line, wantFile, wantLine)
		}
		gotChain := make([]symInline, 0, len(s.Inlined))
		for _, c := range s.Inlined {
			c.File = filepath.Base(c.File)
			gotChain = append(gotChain, c)
		}
		if len(gotChain) != 0 || len(wantChain) != 0 {
			if !reflect.DeepEqual(gotChain, wantChain) {
				t.Errorf("%s: inlined %+v, want %+v", s.Function, gotChain, wantChain)
			}
		}
		checkCallOffset(t, s)
	}
	for fn, w := range fx.wants {
		if g := got[fn]; g != (total{w.allocs, w.bytes}) {
			t.Errorf("%s: %d allocs of %d bytes, want %d of %d", fn, g.allocs, g.bytes, w.allocs, w.bytes)
		}
	}
}

// checkCallOffset checks that a site's offset is the call instruction
// whose end is its return address: the module's bytes at offset decode to
// a call, and its end falls at the address's place in its page (the load
// bias is page-aligned; for a non-PIE executable it is 0).
func checkCallOffset(t *testing.T, s symSite) {
	t.Helper()
	off, err1 := strconv.ParseUint(strings.TrimPrefix(s.Offset, "0x"), 16, 64)
	addr, err2 := strconv.ParseUint(strings.TrimPrefix(s.Address, "0x"), 16, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("%s: offset %q, address %q", s.Function, s.Offset, s.Address)
	}
	f, err := elf.Open(s.Module)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_X == 0 || off < p.Vaddr || off >= p.Vaddr+p.Filesz {
			continue
		}
		code := make([]byte, 16)
		n, _ := p.ReadAt(code, int64(off-p.Vaddr))
		inst, err := x86asm.Decode(code[:n], 64)
		switch {
		case err != nil || inst.Op != x86asm.CALL:
			t.Errorf("%s: offset %#x holds %v (%v), not a call", s.Function, off, inst, err)
		case (off+uint64(inst.Len))%4096 != addr%4096:
			t.Errorf("%s: the call at %#x ends at %#x, address %#x is elsewhere in its page", s.Function, off, off+uint64(inst.Len), addr)
		case f.Type == elf.ET_EXEC && off+uint64(inst.Len) != addr:
			t.Errorf("%s: non-PIE call at %#x ends at %#x, not at address %#x", s.Function, off, off+uint64(inst.Len), addr)
		}
		return
	}
	t.Errorf("%s: offset %#x is in no executable segment of %s", s.Function, off, s.Module)
}

// TestSymbolizeTable: the text table names a call in inlined code "INNER
// (inlined in OUTER)", shortens long C++ names, and --detail prints the
// inline chain under the row and the stack on to main.
func TestSymbolizeTable(t *testing.T) {
	needBPF(t)
	lines := siteLines(t, "inlined.cc")
	bin := fixtureCXX(t, "inlined.cc", "-fno-omit-frame-pointer")
	r := runMemtrace(t, "--top", "0", "--", bin)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{
		fmt.Sprintf(`  store::Pool<…>::grab\(…\) \(inlined in leak_template\(\)\)\s+\S*/inlined.cc:%d  `, lines["grab"]),
		fmt.Sprintf(`  inventory::Table<…>::insert\(std::pair<…>, std::pair<…>\)\s+\S*/inlined.cc:%d  `, lines["insert"]),
		fmt.Sprintf(`  \(anonymous namespace\)::leak_local\(\)\s+\S*/inlined.cc:%d  `, lines["leak_local"]),
	} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("table lacks /%s/:\n%s", want, r.stdout)
		}
	}

	cLines := siteLines(t, "inlined.c")
	cbin := fixture(t, "inlined.c", "-fno-omit-frame-pointer")
	r = runMemtrace(t, "--detail", "--top", "0", "--", cbin)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	want := fmt.Sprintf(`make_buffer \(inlined in leak_inlined\)\s+\S*inlined.c:%d\s+\S+
\s+<- wrap_buffer \(inlined\)  \S*inlined.c:%d  \S+
\s+<- leak_inlined  \S*inlined.c:%d  \S+
\s+<- main  \S*inlined.c:\d+  \S+
`, cLines["make_buffer"], cLines["wrap_buffer"], cLines["leak_inlined"])
	if !regexp.MustCompile(want).MatchString(r.stdout) {
		t.Errorf("--detail output lacks the inline chain and stack /%s/:\n%s", want, r.stdout)
	}

	r = runMemtrace(t, "--json", "--detail", "--top", "0", "--", cbin)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	found := false
	for _, s := range parseSymSites(t, r.stdout) {
		if s.Function != "leak_inlined" {
			continue
		}
		found = true
		var fns []string
		for _, f := range s.Stack {
			fns = append(fns, f.Function)
		}
		if len(fns) != 2 || fns[0] != "leak_inlined" || fns[1] != "main" {
			t.Errorf("stack %v, want leak_inlined, main", fns)
			continue
		}
		if !reflect.DeepEqual(s.Stack[0].Inlined, s.Inlined) || len(s.Inlined) != 3 || s.Inlined[1].Function != "wrap_buffer" {
			t.Errorf("stack[0].inlined %+v, want the site's %+v (3 deep)", s.Stack[0].Inlined, s.Inlined)
		}
		if len(s.Stack[1].Inlined) != 0 {
			t.Errorf("main's call is in no inlined code, got inlined %+v", s.Stack[1].Inlined)
		}
	}
	if !found {
		t.Errorf("no leak_inlined call site:\n%s", r.stdout)
	}
}

func needTools(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI=true but %s is not installed", n)
			}
			t.Skipf("%s not installed", n)
		}
	}
}

// tool runs a build tool, failing the test with its output.
func tool(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func emptyDir(t *testing.T, dir string) string {
	t.Helper()
	d := filepath.Join(dir, "no-debug")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

func buildIDOf(t *testing.T, bin string) string {
	t.Helper()
	for _, l := range strings.Split(tool(t, "readelf", "-n", bin), "\n") {
		if _, id, ok := strings.Cut(l, "Build ID: "); ok {
			return strings.TrimSpace(id)
		}
	}
	t.Fatalf("%s has no build-id", bin)
	return ""
}

// withMiniDebugInfo makes a stripped copy of bin carrying MiniDebugInfo,
// by the recipe of gdb's manual: the function symbols .dynsym lacks, in an
// xz-compressed ELF file in section .gnu_debugdata (weak functions kept
// too).
func withMiniDebugInfo(t *testing.T, bin, dir string) string {
	t.Helper()
	dynamic := map[string]bool{}
	for _, l := range strings.Split(tool(t, "nm", "-D", "--format=posix", "--defined-only", bin), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			dynamic[f[0]] = true
		}
	}
	var keep []string
	for _, l := range strings.Split(tool(t, "nm", "--format=posix", "--defined-only", bin), "\n") {
		// Functions: T, t, and W (weak: template instances, inline
		// functions kept out of line), which the recipe leaves out.
		if f := strings.Fields(l); len(f) > 1 && strings.Contains("TtW", f[1]) && !dynamic[f[0]] {
			keep = append(keep, f[0])
		}
	}
	keepFile := filepath.Join(dir, "keep_symbols")
	if err := os.WriteFile(keepFile, []byte(strings.Join(keep, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	debug := filepath.Join(dir, "debug")
	mini := filepath.Join(dir, "mini_debuginfo")
	tool(t, "objcopy", "--only-keep-debug", bin, debug)
	tool(t, "objcopy", "-S", "--remove-section", ".gdb_index", "--remove-section", ".comment",
		"--keep-symbols="+keepFile, debug, mini)
	tool(t, "xz", "-f", mini)
	run := filepath.Join(dir, "prog")
	tool(t, "strip", "--strip-all", "-R", ".comment", "-o", run, bin)
	tool(t, "objcopy", "--add-section", ".gnu_debugdata="+mini+".xz", run)
	return run
}

// --debug-dir is repeatable, keeps its order and replaces the default.
func TestDebugDirFlag(t *testing.T) {
	c, err := parseFlags([]string{"--debug-dir", "/a", "--debug-dir", "/b", "-p", "1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.DebugDirs, []string{"/a", "/b"}) {
		t.Errorf("debug dirs %q", c.DebugDirs)
	}
	c, err = parseFlags([]string{"-p", "1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.DebugDirs != nil {
		t.Errorf("default: debug dirs %q", c.DebugDirs)
	}
	if _, err := parseFlags([]string{"--debug-dir", "", "-p", "1"}, io.Discard); err == nil {
		t.Error("an empty --debug-dir was accepted")
	}
}
