package main

import (
	"debug/elf"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestStaticBinary checks that `make build` gives a static binary: no
// program interpreter and no shared library needed. A binary linked to libc
// fails to start in a scratch container image ("no such file or
// directory"), and in whole-host mode it would map the libc it probes.
func TestStaticBinary(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not installed")
	}
	dir := t.TempDir()
	out, err := exec.Command("make", "-C", "../..", "build", "BIN="+dir).CombinedOutput()
	if err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	f, err := elf.Open(filepath.Join(dir, "memtrace"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("memtrace has a program interpreter: it is not static")
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) != 0 {
		t.Errorf("memtrace needs shared libraries %v: it is not static", libs)
	}
}
