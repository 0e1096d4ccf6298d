package python

import (
	"bufio"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/memtrace/memtrace/internal/procfs"
)

// Command reports whether the program at path runs CPython: an
// interpreter file (python3.x, through its symlinks), a program linked
// with libpython3.x, or a script whose #! line names either. It reads
// the file's dynamic section or its first line only, so a big program
// costs nothing noticeable. memtrace sizes its ring by it before a
// command starts: a Python script makes a million events a second.
func Command(path string) bool {
	return command(path, 0)
}

func command(path string, depth int) bool {
	// A command named python3 or python3.x: an interpreter, or a
	// version manager's shim that runs one (pyenv's are shell scripts).
	if base := filepath.Base(path); base == "python3" || interpName.MatchString(base) {
		return true
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	if interpName.MatchString(filepath.Base(path)) {
		return true
	}
	// A regular file only: opening a FIFO would wait for a writer.
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [2]byte
	if _, err := f.ReadAt(magic[:], 0); err != nil {
		return false
	}
	if magic == [2]byte{'#', '!'} {
		if depth > 0 {
			return false // a script's interpreter that is a script: not followed
		}
		line, _ := bufio.NewReader(f).ReadString('\n')
		fields := strings.Fields(strings.TrimPrefix(line, "#!"))
		if len(fields) == 0 {
			return false
		}
		if filepath.Base(fields[0]) == "env" {
			// #!/usr/bin/env python3: the first word that is no option.
			for _, w := range fields[1:] {
				if !strings.HasPrefix(w, "-") && !strings.Contains(w, "=") {
					if strings.HasPrefix(w, "python3") {
						return true
					}
					found, err := exec.LookPath(w)
					return err == nil && command(found, depth+1)
				}
			}
			return false
		}
		return strings.HasPrefix(filepath.Base(fields[0]), "python3") || command(fields[0], depth+1)
	}
	e, err := elf.NewFile(f)
	if err != nil {
		return false
	}
	libs, _ := e.ImportedLibraries()
	for _, l := range libs {
		if interpName.MatchString(filepath.Base(l)) {
			return true
		}
	}
	return false
}

// Mapped reports whether process pid maps a CPython interpreter now.
func Mapped(pid int) bool {
	maps, err := procfs.ReadMaps(pid)
	if err != nil {
		return false
	}
	for _, m := range maps {
		if interpName.MatchString(filepath.Base(m.Path)) {
			return true
		}
	}
	return false
}
