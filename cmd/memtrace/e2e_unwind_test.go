package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnwindChains: with --detail, stacks through code without frame
// pointers (-O2 -fomit-frame-pointer) are unwound from .eh_frame, frame by
// frame: through a call into a shared library's PLT, out of a signal
// handler (through glibc's sigreturn trampoline and the interrupted raise),
// and out of a dlopen'ed library called through a pointer.
func TestUnwindChains(t *testing.T) {
	needBPF(t)
	const nofp = "-fomit-frame-pointer"
	lib := fixture(t, "unwinding/chainlib.c", "-shared", "-fPIC", nofp)
	plugin := fixture(t, "plugin.c", "-shared", "-fPIC", nofp)
	bin := fixture(t, "unwinding/chains.c", nofp, lib, "-Wl,-rpath,"+filepath.Dir(lib))
	lines := siteLines(t, "unwinding/chains.c")
	libLines := siteLines(t, "unwinding/chainlib.c")
	// After its dlopen the fixture waits for a byte on stdin: it is sent
	// once memtrace says the plugin's unwind table is in, so that the
	// plugin's allocations unwind however slow the machine (a kernel
	// under TCG) builds the table.
	r := runOnSignal(t, "unwind table loaded\" file="+plugin, "--json", "--detail", "--top", "0", "--", bin, plugin)
	rep := parseNDJSON(t, r.stdout)
	type frame struct {
		fn   string
		line int // 0: not checked (libc's own lines)
	}
	tests := []struct {
		site  string
		bytes uint64
		want  []frame
	}{
		{"lib_alloc", 40, []frame{{"lib_alloc", libLines["lib_alloc"]}, {"via_plt", lines["via_plt"]}, {"main", lines["main_plt"]}}},
		{"on_signal", 56, []frame{{"on_signal", lines["on_signal"]}, {"__restore_rt", 0},
			{"__pthread_kill_implementation", 0}, {"raise", 0}, {"raise_it", lines["raise_it"]}, {"main", lines["main_raise"]}}},
		{"plugin_leak", 231, []frame{{"plugin_leak", 0}, {"via_dlopen", lines["via_dlopen"]}, {"main", lines["main_dlopen"]}}},
	}
	for _, tt := range tests {
		t.Run(tt.site, func(t *testing.T) {
			var site *siteRecord
			for i, s := range rep.sites {
				if s.Function == tt.site {
					if site != nil {
						t.Fatalf("two stacks for %s: %+v and %+v", tt.site, *site, s)
					}
					site = &rep.sites[i]
				}
			}
			if site == nil {
				t.Fatalf("no call site in %s: %+v", tt.site, rep.sites)
			}
			if site.LiveBytes != tt.bytes {
				t.Errorf("%s: %d live bytes, want %d", tt.site, site.LiveBytes, tt.bytes)
			}
			if site.StackTruncated == nil || *site.StackTruncated {
				t.Errorf("stack_truncated = %v, want false", site.StackTruncated)
			}
			if len(site.Stack) != len(tt.want) {
				t.Fatalf("stack %+v, want %v", site.Stack, tt.want)
			}
			for i, w := range tt.want {
				f := site.Stack[i]
				if f.Function != w.fn || (w.line != 0 && f.Line != w.line) {
					t.Errorf("frame %d: %s:%d, want %s:%d (stack %+v)", i, f.Function, f.Line, w.fn, w.line, site.Stack)
				}
			}
		})
	}
}

// TestWrapperRules: who is charged for allocations made through a stripped
// library's wrappers, under each way of setting the rule. xmalloc follows
// the automatic naming rule, my_alloc does not; both reach malloc through a
// static helper that stripping left unnamed, which is always skipped.
// deep_alloc calls xmalloc through ten unnamed functions: it is charged
// 13 frames from malloc, past the 8 frames wrappers are looked for.
func TestWrapperRules(t *testing.T) {
	needBPF(t)
	built := fixture(t, "unwinding/wraplib.c", "-shared", "-fPIC")
	lib := filepath.Join(t.TempDir(), "libwrap-stripped.so")
	if out, err := exec.Command("strip", "--strip-unneeded", "-o", lib, built).CombinedOutput(); err != nil {
		t.Fatalf("strip: %v: %s", err, out)
	}
	bin := fixture(t, "unwinding/wrapped.c", lib)
	type site struct {
		allocs, bytes uint64
	}
	tests := []struct {
		name  string
		flags []string
		want  map[string]site // heap sites by charged function
	}{
		{"automatic rule", nil, map[string]site{"use_x": {1, 24}, "my_alloc": {1, 32}, "deep_alloc": {1, 40}}},
		{"--wrapper", []string{"--wrapper", "my_alloc"}, map[string]site{"use_x": {1, 24}, "use_my": {1, 32}, "deep_alloc": {1, 40}}},
		{"--wrapper deep_alloc", []string{"--wrapper", "deep_alloc"}, map[string]site{"use_x": {1, 24}, "my_alloc": {1, 32}, "use_deep": {1, 40}}},
		{"--no-auto-wrappers", []string{"--no-auto-wrappers"}, map[string]site{"xmalloc": {3, 96}}},
		{"--not-wrapper", []string{"--not-wrapper", "xmalloc"}, map[string]site{"xmalloc": {3, 96}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runMemtrace(t, append(append([]string{"--json", "--top", "0"}, tt.flags...), "--", bin)...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			rep := parseNDJSON(t, r.stdout)
			p := rep.finalProcess(t)
			got := map[string]site{}
			for _, s := range rep.sites {
				if s.PID == p.PID && s.Category == "heap" && (s.Module == bin || s.Module == lib) {
					g := got[s.Function]
					got[s.Function] = site{g.allocs + s.Allocs, g.bytes + s.AllocBytes}
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("sites %v, want %v", got, tt.want)
			}
			for fn, w := range tt.want {
				if got[fn] != w {
					t.Errorf("%s: %+v, want %+v (all: %v)", fn, got[fn], w, got)
				}
			}
		})
	}
}

// TestWrappersOnOverlay: with libstdc++ and libc mapped from an overlayfs
// (as in containers, and in the kernel matrix's guests), where stat names
// another device and inode than the probes see, the unwind tables are
// still loaded before the first allocation: every new is charged to its
// caller from the first.
func TestWrappersOnOverlay(t *testing.T) {
	needBPF(t)
	bin := fixtureCXX(t, "cxx.cc")
	// The upper layer on a tmpfs of its own: an overlay's upper layer cannot
	// be an overlay (the kernel matrix's guests run on one).
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	merged := filepath.Join(dir, "merged")
	for _, d := range []string{"upper", "work", "merged"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	libdir := filepath.Dir(mustLookLib(t, "libstdc++.so.6"))
	opts := "lowerdir=" + libdir + ",upperdir=" + filepath.Join(dir, "upper") + ",workdir=" + filepath.Join(dir, "work")
	if out, err := exec.Command("mount", "-t", "overlay", "overlay", "-o", opts, merged).CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("mount overlay: %v: %s", err, out)
		}
		t.Skipf("mount overlay: %v: %s", err, out)
	}
	// Lazily: a kernel without uprobe_multi tears the probes on its files down in the background.
	t.Cleanup(func() { exec.Command("umount", "-l", merged).Run() })
	cmd := exec.Command(memtrace(t), "--json", "--top", "0", "--", bin)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+merged)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("memtrace: %v", err)
	}
	rep := parseNDJSON(t, string(out))
	p := rep.finalProcess(t)
	got := rep.byFunction(p.PID)
	if g := got["heap:churn_new()"]; g.Allocs != 1000 {
		t.Errorf("churn_new(): %+v, want 1000 allocations charged to it; sites %+v", g, rep.sites)
	}
	if g := got["heap:operator new(unsigned long)"]; g.Allocs != 0 {
		t.Errorf("%d allocations charged to operator new itself", g.Allocs)
	}
}

// mustLookLib is the path of a library the dynamic linker finds.
func mustLookLib(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("g++", "-print-file-name="+name).Output()
	p := strings.TrimSpace(string(out))
	if err != nil || !filepath.IsAbs(p) {
		t.Fatalf("g++ -print-file-name=%s: %q, %v", name, p, err)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return real
}
