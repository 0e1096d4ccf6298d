package symbolize

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// TestAddProgram: a process gone before its mappings were read still
// resolves its program's call sites from what its exec record carries,
// the file found by its identity among the opened modules or by its path.
func TestAddProgram(t *testing.T) {
	needTool(t, "gcc")
	dir := tempDir(t)
	bin := filepath.Join(dir, "exec_program")
	run(t, "gcc", "-O2", "-o", bin, "../testdata/exec_program.c")
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	var mainAddr uint64
	for _, s := range syms {
		if s.Name == "main" {
			mainAddr = s.Value
		}
	}
	var first uint64 = 1<<64 - 1
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			first = min(first, p.Vaddr)
		}
	}

	for _, tc := range []struct {
		name    string
		path    string
		preopen bool // the file was opened through another process
		dev     uint64
		ino     uint64
		shift   uint64 // the code's range moved: another file
		want    string
	}{
		{"by path", bin, false, uint64(st.Dev), st.Ino, 0, "main"},
		{"opened already", "/exec_program", true, uint64(st.Dev), st.Ino, 0, "main"},
		// overlayfs: stat's device is not the kernel's.
		{"opened already, another device", "/exec_program", true, uint64(st.Dev) + 1, st.Ino, 0, "main"},
		{"opened already, code elsewhere in its page", "/exec_program", true, uint64(st.Dev), st.Ino, 8, ""},
		{"by path, code elsewhere in its page", bin, false, uint64(st.Dev), st.Ino, 8, ""},
		{"by path, another file now", bin, false, uint64(st.Dev), st.Ino + 1, 0, ""},
		{"not found", "/exec_program", false, uint64(st.Dev), st.Ino, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The process ran and exited: only its exec's figures are left.
			cmd := exec.Command(bin)
			out, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			var start, end uint64
			if _, err := fmt.Sscanf(string(out), "%x %x", &start, &end); err != nil {
				t.Fatalf("%q: %v", out, err)
			}
			pid := cmd.Process.Pid
			r := NewResolver()
			defer r.Close()
			if tc.preopen {
				if _, err := r.mods.module(bin, 0, origin{modPath: bin, roots: []string{""}}); err != nil {
					t.Fatal(err)
				}
			}
			prog := Program{Path: tc.path, Start: start + tc.shift, End: end, Dev: tc.dev, Ino: tc.ino}
			added := r.AddProgram(pid, prog)
			if added != (tc.want != "") {
				t.Fatalf("AddProgram: %v", added)
			}
			// A return address just past main's first byte.
			fr := r.Resolve(pid, mainAddr+start-first+1)
			if fr.Function != tc.want {
				t.Errorf("function %q, want %q (%+v)", fr.Function, tc.want, fr)
			}
			if added && fr.Module != tc.path {
				t.Errorf("module %q, want %q", fr.Module, tc.path)
			}
			if added && r.AddProgram(pid, prog) {
				t.Error("a second AddProgram replaced the first")
			}
		})
	}
}
