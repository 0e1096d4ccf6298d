package symbolize

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// execProgram builds testdata/exec_program.c with far_away in a second
// executable segment, and returns it with its functions' addresses and
// the lowest executable segment's.
func execProgram(t *testing.T) (bin string, funcs map[string]uint64, first uint64) {
	t.Helper()
	needTool(t, "gcc")
	bin = filepath.Join(tempDir(t), "exec_program")
	run(t, "gcc", "-O2", "-Wl,--section-start=far_code=0x800000", "-o", bin, "../../testdata/exec_program.c")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	funcs = map[string]uint64{}
	for _, s := range syms {
		if s.Name == "main" || s.Name == "far_away" {
			funcs[s.Name] = s.Value
		}
	}
	first = 1<<64 - 1
	n := 0
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			first = min(first, p.Vaddr)
			n++
		}
	}
	if len(funcs) != 2 || n != 2 {
		t.Fatalf("%s: functions %v, %d executable segments; want main, far_away and 2", bin, funcs, n)
	}
	return bin, funcs, first
}

// runExecProgram runs bin to its exit and returns its pid and code range.
func runExecProgram(t *testing.T, bin string) (pid int, start, end uint64) {
	t.Helper()
	cmd := exec.Command(bin)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Sscanf(string(out), "%x %x", &start, &end); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	return cmd.Process.Pid, start, end
}

// TestAddProgram: a process gone before its mappings were read still
// resolves its program's call sites, in each executable segment, from
// what its exec record carries: the file found among the opened modules
// or by its name, and only if it is the file that was loaded.
func TestAddProgram(t *testing.T) {
	bin, funcs, first := execProgram(t)
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	for _, tc := range []struct {
		name    string
		path    string
		preopen bool   // the file was opened through another process's mappings
		shift   uint64 // the code range moved: another file
		ino     uint64 // added to the inode
		size    uint64 // added to the size
		module  string // "": not added
	}{
		{name: "by path", path: bin, module: bin},
		{name: "opened already", path: "/exec_program", preopen: true, module: bin},
		{name: "opened already, relative name", path: "./exec_program", preopen: true, module: bin},
		{name: "opened already, code elsewhere in its page", path: "/exec_program", preopen: true, shift: 8},
		{name: "opened already, another size", path: "/exec_program", preopen: true, size: 1},
		{name: "by path, code elsewhere in its page", path: bin, shift: 8},
		{name: "by path, another file now", path: bin, ino: 1},
		{name: "by path, another size", path: bin, size: 1},
		{name: "relative name", path: "./exec_program"},
		{name: "not found", path: "/exec_program"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pid, start, end := runExecProgram(t, bin) // gone: only its exec's figures are left
			r := NewResolver()
			defer r.Close()
			if tc.preopen {
				if _, err := r.mods.module(bin, 0, origin{modPath: bin, roots: []string{""}, ourPath: true}); err != nil {
					t.Fatal(err)
				}
			}
			prog := Program{Path: tc.path, Start: start + tc.shift, End: end, Dev: uint64(st.Dev), Ino: st.Ino + tc.ino, Size: uint64(st.Size) + tc.size}
			err := r.AddProgram(pid, prog)
			if (err == nil) != (tc.module != "") {
				t.Fatalf("AddProgram: %v", err)
			}
			for fn, addr := range funcs {
				// A return address just past the function's first byte.
				fr := r.Resolve(pid, addr+start-first+1)
				want := fn
				if tc.module == "" {
					want = ""
				}
				if fr.Function != want || fr.Module != tc.module {
					t.Errorf("%s: function %q in %q, want %q in %q (%+v)", fn, fr.Function, fr.Module, want, tc.module, fr)
				}
			}
			if err == nil && r.AddProgram(pid, prog) == nil {
				t.Error("a second AddProgram replaced the first")
			}
		})
	}
}

// TestOpenedByInode: a module opened through stat(2)'s view of a file is
// found by the kernel's, whose device differs on overlayfs and btrfs
// (stat's is then a pseudo device, major 0), never across real devices,
// and not when two fitting files share the inode.
func TestOpenedByInode(t *testing.T) {
	bin, _, _ := execProgram(t)
	open := func() *Module {
		f, err := os.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		m, err := newModule(f, f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	a, b := open(), open()
	fits := func(*Module) bool { return true }
	kernel := unix.Mkdev(8, 1)
	for _, tc := range []struct {
		name    string
		entries map[fileKey]cacheEntry
		want    *Module
	}{
		{"same device", map[fileKey]cacheEntry{{dev: kernel, ino: 5, size: 100}: {mod: a}}, a},
		{"pseudo device", map[fileKey]cacheEntry{{dev: unix.Mkdev(0, 40), ino: 5, size: 100}: {mod: a}}, a},
		{"another real device", map[fileKey]cacheEntry{{dev: unix.Mkdev(8, 2), ino: 5, size: 100}: {mod: a}}, nil},
		{"another size", map[fileKey]cacheEntry{{dev: kernel, ino: 5, size: 101}: {mod: a}}, nil},
		{"another inode", map[fileKey]cacheEntry{{dev: kernel, ino: 6, size: 100}: {mod: a}}, nil},
		{"two pseudo devices", map[fileKey]cacheEntry{
			{dev: unix.Mkdev(0, 40), ino: 5, size: 100}: {mod: a},
			{dev: unix.Mkdev(0, 41), ino: 5, size: 100}: {mod: b},
		}, nil},
		{"the same device first", map[fileKey]cacheEntry{
			{dev: unix.Mkdev(0, 40), ino: 5, size: 100}: {mod: b},
			{dev: kernel, ino: 5, size: 100}:            {mod: a},
		}, a},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &moduleCache{byFile: tc.entries}
			if got, _ := c.opened(kernel, 5, 100, fits); got != tc.want {
				t.Errorf("opened: %p, want %p (a %p, b %p)", got, tc.want, a, b)
			}
		})
	}
}
