package python

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestCommand: interpreters by name and through symlinks, scripts by
// their #! line, and other programs not.
func TestCommand(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	interp := write("python3.11", "not an ELF: the name is enough")
	link := filepath.Join(dir, "py")
	if err := os.Symlink(interp, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
		want bool
	}{
		{"interpreter", interp, true},
		{"symlink to one", link, true},
		{"env shebang", write("a.py", "#!/usr/bin/env python3\nprint(1)\n"), true},
		{"env shebang with options", write("b.py", "#!/usr/bin/env -S PYTHONHASHSEED=0 python3.12 -u\n"), true},
		{"absolute shebang", write("c.py", "#!"+interp+" -X dev\n"), true},
		{"shebang through a symlink", write("d.py", "#!"+link+"\n"), true},
		{"shell script", write("e.sh", "#!/bin/sh\nexec python3 x.py\n"), false},
		{"pyenv's shim", write("python3", "#!/usr/bin/env bash\nexec pyenv exec python3 \"$@\"\n"), true},
		{"empty shebang", write("f", "#!\n"), false},
		{"script interpreter that is a script", write("g", "#!"+filepath.Join(dir, "e.sh")+"\n"), false},
		{"ELF without libpython", "/bin/true", false},
		{"missing", filepath.Join(dir, "nothing"), false},
		{"FIFO", fifo, false}, // not opened: that would wait for a writer
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Command(tt.path); got != tt.want {
				t.Errorf("Command(%s) = %v, want %v", tt.path, got, tt.want)
			}
		})
	}
	if Mapped(os.Getpid()) {
		t.Errorf("the test process maps an interpreter")
	}
}
