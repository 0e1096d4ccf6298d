package allocator

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/memtrace/memtrace/internal/procfile"
	"github.com/memtrace/memtrace/internal/procfs"
)

// ErrNoProcess means the process does not exist (any more).
var ErrNoProcess = errors.New("no such process")

// ForCommand lists the modules exe will load, in symbol-lookup order, before
// it has loaded them: the executable, then what its dynamic linker reports
// for `--list` under the same LD_PRELOAD and LD_LIBRARY_PATH (preloads come
// first there, then libraries in load order). A static executable is its
// own allocator.
func ForCommand(exe string, env []string) ([]Module, error) {
	interp, err := interpreter(exe)
	if err != nil {
		return nil, err
	}
	mods := []Module{{Path: exe, Module: exe, Exe: true}}
	if interp == "" {
		return mods, nil
	}
	cmd := exec.Command(interp, "--list", exe)
	for _, kv := range env {
		if strings.HasPrefix(kv, "LD_PRELOAD=") || strings.HasPrefix(kv, "LD_LIBRARY_PATH=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("list libraries of %s with %s: %w: %s", exe, interp, err, strings.TrimSpace(stderr.String()))
	}
	for _, p := range parseList(out) {
		mods = append(mods, Module{Path: p, Module: p})
	}
	return mods, nil
}

// parseList reads the dynamic linker's --list output: one
// "name => /path (0x…)" or "/path (0x…)" line per loaded object.
func parseList(out []byte) []string {
	var paths []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, "=> "); i >= 0 {
			line = line[i+3:]
		}
		if i := strings.LastIndex(line, " (0x"); i >= 0 {
			line = line[:i]
		}
		if strings.HasPrefix(line, "/") {
			paths = append(paths, line)
		}
	}
	return paths
}

// interpreter returns the PT_INTERP of exe, "" for a static executable.
func interpreter(exe string) (interp string, err error) {
	defer func() {
		if r := recover(); r != nil {
			interp, err = "", fmt.Errorf("read %s: malformed ELF: %v", exe, r)
		}
	}()
	f, err := elf.Open(exe)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", exe, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return "", fmt.Errorf("read interpreter of %s: %w", exe, err)
			}
			return string(bytes.TrimRight(b, "\x00")), nil
		}
	}
	return "", nil
}

// ForProcess lists the modules a running process has mapped, in
// symbol-lookup order: its executable, its LD_PRELOAD libraries, the
// libraries its executable needs (breadth first, as the dynamic linker
// searches), then anything else it mapped (dlopen'ed). Paths go through
// /proc/PID/root so that processes in other mount namespaces work.
func ForProcess(pid int) ([]Module, error) {
	proc := "/proc/" + strconv.Itoa(pid)
	f, err := os.Open(proc + "/maps")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("process %d: %w", pid, ErrNoProcess)
		}
		return nil, fmt.Errorf("read maps of process %d: %w", pid, err)
	}
	maps, err := procfs.ParseMaps(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("read maps of process %d: %w", pid, err)
	}
	exe, err := os.Readlink(proc + "/exe")
	if err != nil {
		return nil, fmt.Errorf("process %d: executable: %w", pid, err)
	}
	exe = strings.TrimSuffix(exe, " (deleted)")

	// Every mapped file once, in address order, openable from here.
	var mapped []Module
	opener := map[string]string{}
	for _, m := range maps {
		if !strings.HasPrefix(m.Path, "/") || !strings.Contains(m.Perms, "x") {
			continue
		}
		if _, ok := opener[m.Path]; ok {
			continue
		}
		opener[m.Path] = openPath(proc, m)
		p := opener[m.Path]
		mapped = append(mapped, Module{Path: p, Module: m.Path, Exe: m.Path == exe})
	}
	if len(mapped) == 0 {
		return nil, fmt.Errorf("process %d has no mapped executable code (a kernel thread?): %w", pid, ErrNotFound)
	}

	byName := map[string]Module{}
	for _, m := range mapped {
		byName[filepath.Base(m.Module)] = m
		if so := soname(m.Path); so != "" {
			byName[so] = m
		}
	}
	var order []Module
	added := map[string]bool{}
	add := func(m Module) {
		if !added[m.Module] {
			added[m.Module] = true
			order = append(order, m)
		}
	}
	for _, m := range mapped {
		if m.Exe {
			add(m)
		}
	}
	for _, p := range preloads(proc) {
		if m, ok := byName[filepath.Base(p)]; ok {
			add(m)
		}
	}
	queue := append([]Module(nil), order...)
	for len(queue) > 0 {
		m := queue[0]
		queue = queue[1:]
		for _, n := range needed(m.Path) {
			if d, ok := byName[n]; ok && !added[d.Module] {
				add(d)
				queue = append(queue, d)
			}
		}
	}
	for _, m := range mapped {
		add(m)
	}
	return order, nil
}

// openPath returns a path that opens the file of mapping m from here: its
// path under the process's root (what a container sees) when that is the
// mapped inode, else its path here (a chroot in our mount namespace, whose
// maps show our paths), else the mapping itself under map_files (deleted
// files, or paths that resolve nowhere, as in a chroot in another mount
// namespace). A path by name must reach the mapped inode without a
// symbolic link: the kernel names mapped files by canonical paths, and a
// link there was planted by whoever owns the directory (the process, in a
// container), to make memtrace read and probe another file.
func openPath(proc string, m procfs.Mapping) string {
	mapFile := fmt.Sprintf("%s/map_files/%x-%x", proc, m.Start, m.End)
	if m.Deleted {
		return mapFile
	}
	for _, c := range []struct{ root, path string }{{proc + "/root", m.Path}, {"/", m.Path}} {
		if ino, ok := inodeNoLinks(c.root, c.path); ok && (m.Inode == 0 || ino == m.Inode) {
			if c.root == "/" {
				return c.path
			}
			return c.root + c.path
		}
	}
	return mapFile
}

// inodeNoLinks is the inode of the regular file at path inside root,
// reached without a symbolic link.
func inodeNoLinks(root, path string) (uint64, bool) {
	f, err := procfile.Open(root, path, procfile.NoSymlinks, 0)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Ino, true
}

// preloads reads LD_PRELOAD from the process's initial environment.
func preloads(proc string) []string {
	b, err := os.ReadFile(proc + "/environ")
	if err != nil {
		return nil
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("LD_PRELOAD=")); ok {
			return strings.FieldsFunc(string(v), func(r rune) bool { return r == ' ' || r == ':' })
		}
	}
	return nil
}

func needed(path string) []string { return dynamic(path).needed }

func soname(path string) string { return dynamic(path).soname }

const elfSoname = elf.DT_SONAME

// Missing lists the libraries that the executable among mods (ForProcess's
// result) needs, or that its LD_PRELOAD names, and that are not mapped
// yet: right after an exec only the program and its dynamic linker are
// mapped, and the libraries follow as the linker loads them. A static
// executable needs none.
func Missing(pid int, mods []Module) []string {
	have := map[string]bool{}
	var exe *Module
	for i, m := range mods {
		have[filepath.Base(m.Module)] = true
		if so := soname(m.Path); so != "" {
			have[so] = true
		}
		if m.Exe && exe == nil {
			exe = &mods[i]
		}
	}
	if exe == nil {
		return nil
	}
	var missing []string
	want := append(needed(exe.Path), preloads("/proc/"+strconv.Itoa(pid))...)
	for _, n := range want {
		if !have[filepath.Base(n)] {
			missing = append(missing, n)
		}
	}
	return missing
}

func openELF(path string) (f *elf.File, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, fmt.Errorf("read %s: malformed ELF: %v", path, r)
		}
	}()
	return elf.Open(path)
}
