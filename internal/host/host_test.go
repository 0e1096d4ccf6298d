package host

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/allocator"
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/testwait"
	"github.com/memtrace/memtrace/internal/tracer"
)

func TestUnder(t *testing.T) {
	for _, c := range []struct {
		path, root string
		want       bool
	}{
		{"/a/b", "/a", true},
		{"/a", "/a", true},
		{"/ab", "/a", false},
		{"/a/b/c", "/a/b/", true},
		{"/x", "/", true},
	} {
		if got := under(c.path, c.root); got != c.want {
			t.Errorf("under(%q, %q) = %v", c.path, c.root, got)
		}
	}
}

func TestCommName(t *testing.T) {
	if got := CommName("a-very-long-command-name"); got != "a-very-long-com" {
		t.Errorf("CommName = %q, want the kernel's 15 bytes", got)
	}
}

func TestFilterMatchesItself(t *testing.T) {
	me := os.Getpid()
	if !(Filter{}).Match(me) || !(Filter{Comm: Comm(me)}).Match(me) || (Filter{Comm: "no-such-comm"}).Match(me) {
		t.Error("comm filter")
	}
	if cg, ok := cgroupOf(me); ok {
		if !(Filter{Cgroup: cg}).Match(me) || (Filter{Cgroup: cg + "-other"}).Match(me) {
			t.Errorf("cgroup filter on %q", cg)
		}
	}
	if !Alive(me) || Alive(1<<30) {
		t.Error("Alive")
	}
}

func TestResolveCgroup(t *testing.T) {
	mnt, err := cgroup2Mount()
	if err != nil {
		t.Skip(err)
	}
	for _, arg := range []string{mnt, "/"} {
		dir, path, err := ResolveCgroup(arg)
		if err != nil || dir != mnt || path != "/" {
			t.Errorf("ResolveCgroup(%q) = %q, %q, %v; want %q, /", arg, dir, path, err, mnt)
		}
	}
	if _, _, err := ResolveCgroup("/no/such/cgroup"); err == nil {
		t.Error("a missing cgroup resolved")
	}
	if _, _, err := ResolveCgroup("relative"); err == nil {
		t.Error("a relative path resolved")
	}
}

func TestByPath(t *testing.T) {
	p := func(path string, off uint64) tracer.Placement {
		return tracer.Placement{Probe: allocator.Probe{Path: path, Offset: off}}
	}
	f := Found{
		New:  []tracer.Placement{p("/a", 1), p("/b", 2), p("/a", 3)},
		keys: []probeKey{{fileKey{1, 1}, 1}, {fileKey{1, 2}, 2}, {fileKey{1, 1}, 3}},
	}
	g := f.ByPath()
	if len(g) != 2 || len(g[0].New) != 2 || len(g[1].New) != 1 || g[0].keys[1].offset != 3 {
		t.Fatalf("ByPath = %+v", g)
	}
	var fd Finder
	fd.Placed(g[0])
	if !fd.placed[probeKey{fileKey{1, 1}, 3}] || fd.placed[probeKey{fileKey{1, 2}, 2}] {
		t.Errorf("placed %v", fd.placed)
	}
	if !slices.Equal(fd.Files(), []string{""}) {
		t.Errorf("files %v", fd.Files())
	}
}

// TestScanSelfAndKernelThread: memtrace never scans itself; a kernel
// thread has no allocator.
func TestScanSelfAndKernelThread(t *testing.T) {
	f := Finder{Self: os.Getpid()}
	if _, err := f.Scan(os.Getpid()); err == nil {
		t.Error("memtrace scanned itself")
	}
	if _, err := f.Scan(2); err == nil { // kthreadd
		t.Error("a kernel thread has an allocator")
	}
}

// TestScanExtra: Extra's probes (--mark's) are found in a process's
// modules and, like the allocator's, placed once per file: a second
// process on the same files brings nothing new. Excluded from Files.
func TestScanExtra(t *testing.T) {
	var procs []*exec.Cmd
	for range 2 {
		c := exec.Command("sleep", "30")
		if err := c.Start(); err != nil {
			t.Skip(err)
		}
		defer func() { c.Process.Kill(); c.Wait() }()
		procs = append(procs, c)
	}
	f := Finder{Self: os.Getpid(), Extra: func(mods []allocator.Module) []allocator.Probe {
		probes := allocator.BindNamed(mods, []string{"clock_nanosleep"})
		for i := range probes {
			probes[i].Func = event.FuncMark
		}
		return probes
	}}
	var found Found
	var err error
	testwait.For(t, "its libraries mapped", func() bool {
		found, err = f.Scan(procs[0].Process.Pid)
		return err == nil && len(found.Missing) == 0
	})
	marks := 0
	for _, p := range found.New {
		if p.Func == event.FuncMark {
			marks++
			if p.Symbol != "clock_nanosleep" {
				t.Errorf("extra probe %+v", p)
			}
		}
	}
	if marks != 1 || len(found.New) < 3 {
		t.Fatalf("%d extra probes among %d, want 1 and the allocator's", marks, len(found.New))
	}
	for _, g := range found.ByPath() {
		f.Placed(g)
	}
	for _, name := range f.Files() {
		if !strings.Contains(name, "libc") {
			t.Errorf("allocator files %v: want libc alone", f.Files())
		}
	}
	again, err := f.Scan(procs[1].Process.Pid)
	if err != nil || len(again.New) != 0 {
		t.Errorf("second process: %d new probes (%v), want none", len(again.New), err)
	}
}
