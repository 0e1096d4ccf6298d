package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// siteLines maps "function" to the line marked `@site function` in a
// fixture source, so that tests assert the exact line of each call.
func siteLines(t *testing.T, src string) map[string]int {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "testdata", src))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := map[string]int{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if _, after, ok := strings.Cut(sc.Text(), "@site "); ok {
			m[strings.Fields(after)[0]] = n
		}
	}
	return m
}

// TestWrappers: allocations made through operator new (all variants), strdup
// and asprintf are charged to the function that called the wrapper, at the
// line of that call, with exact bytes and blocks — through Debian's
// libstdc++ and libc, which have no frame pointers.
func TestWrappers(t *testing.T) {
	needBPF(t)
	tests := []struct {
		name string
		bin  func(t *testing.T) string
		src  string
		want map[string]siteTotals
	}{
		{"C++ operator new", func(t *testing.T) string { return fixtureCXX(t, "cxx.cc") }, "cxx.cc", map[string]siteTotals{
			"leak_new()":       {Allocs: 4, AllocBytes: 192, LiveAllocs: 4, LiveBytes: 192},
			"leak_new_array()": {Allocs: 1, AllocBytes: 400, LiveAllocs: 1, LiveBytes: 400},
			"leak_nothrow()":   {Allocs: 1, AllocBytes: 10, LiveAllocs: 1, LiveBytes: 10},
			"leak_aligned()":   {Allocs: 1, AllocBytes: 64, LiveAllocs: 1, LiveBytes: 64},
			"leak_strdup()":    {Allocs: 1, AllocBytes: 6, LiveAllocs: 1, LiveBytes: 6},
			"churn_new()":      {Allocs: 1000, AllocBytes: 48000, Frees: 1000, FreedBytes: 48000},
			"make_a()":         {Allocs: 500, AllocBytes: 24000, Frees: 500, FreedBytes: 24000},
			"make_b()":         {Allocs: 1000, AllocBytes: 48000, Frees: 1000, FreedBytes: 48000},
		}},
		{"C strdup and asprintf", func(t *testing.T) string { return fixture(t, "demo/leaky.c") }, "demo/leaky.c", map[string]siteTotals{
			// 5000 x malloc(16) on line 28, and asprintf on line 29: a malloc(100)
			// and a realloc to the string's length per call.
			"remember_session": {Allocs: 15000, AllocBytes: 5000*16 + 5000*100 + 44440, Frees: 5000, FreedBytes: 5000 * 100, LiveAllocs: 10000, LiveBytes: 5000*16 + 44440},
			// strdup of "GET /item/N HTTP/1.1"; 1111 requests match "/item/7" and leak.
			"check_headers": {Allocs: 20000},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lines := siteLines(t, tt.src)
			r := runMemtrace(t, "--json", "--top", "0", "--", tt.bin(t))
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			rep := parseNDJSON(t, r.stdout)
			p := rep.finalProcess(t)
			for _, s := range rep.sites {
				if s.Function == "" || s.Module == "" {
					continue
				}
				if strings.Contains(s.Module, "libc.so") && s.Category == "heap" {
					t.Errorf("a heap call site is charged to libc: %+v", s)
				}
			}
			got := rep.byFunction(p.PID)
			for fn, w := range tt.want {
				g := got["heap:"+fn]
				if fn == "check_headers" {
					if g.Allocs != w.Allocs || g.LiveAllocs != 1111 {
						t.Errorf("%s: got %+v, want 20000 allocs and 1111 live", fn, g)
					}
				} else if g != w {
					t.Errorf("%s: got %+v, want %+v", fn, g, w)
				}
				line, found := lines[fn], false
				for _, s := range rep.sites {
					found = found || (s.Function == fn && s.Final && s.Line == line)
				}
				if !found {
					t.Errorf("%s: no call site at line %d (the wrapper call)", fn, line)
				}
			}
		})
	}
}

// TestDlopenUnloaded: a library loaded with dlopen, leaking, and unloaded
// before the process exits still has its call site named, file and line.
func TestDlopenUnloaded(t *testing.T) {
	needBPF(t)
	lib := fixture(t, "plugin.c", "-shared", "-fPIC")
	bin := fixture(t, "dlopen.c")
	r := runMemtrace(t, "--json", "--top", "0", "--", bin, lib)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	rep := parseNDJSON(t, r.stdout)
	p := rep.finalProcess(t)
	got := rep.byFunction(p.PID)["heap:plugin_leak"]
	if got != (siteTotals{Allocs: 3, AllocBytes: 231, LiveAllocs: 3, LiveBytes: 231}) {
		t.Errorf("plugin_leak: %+v; sites: %+v", got, rep.sites)
	}
	line := siteLines(t, "plugin.c")["plugin_leak"]
	for _, s := range rep.sites {
		if s.Function == "plugin_leak" && (s.Line != line || filepath.Base(s.File) != "plugin.c" || s.Module != lib) {
			t.Errorf("plugin_leak at %s:%d in %s, want plugin.c:%d in %s", s.File, s.Line, s.Module, line, lib)
		}
	}
}
