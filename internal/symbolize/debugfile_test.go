package symbolize

import (
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// buildIDOf reads the GNU build-id of the ELF file at path.
func buildIDOf(t testing.TB, path string) string {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	id := buildID(f)
	if id == "" {
		t.Fatalf("%s has no build-id", path)
	}
	return id
}

// leakFrames resolves the fixture's LEAK_A/B/C addresses in a live process
// of bin with r, and reports what each resolves to as "fn file:line".
func leakFrames(t *testing.T, r *Resolver, fx *fixture) []string {
	t.Helper()
	if err := r.Capture(fx.pid()); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tag := range []string{"LEAK_A", "LEAK_B", "LEAK_C"} {
		f := baseFrame(r.Resolve(fx.pid(), fx.addr(tag)))
		out = append(out, f.Function+" "+f.File+":"+strconv.Itoa(f.Line))
	}
	return out
}

// moduleOf is the module of the mapping holding the call before ret.
func (r *Resolver) moduleOf(pid int, ret uint64) *Module {
	m, _, ok := r.codeAt(pid, ret-1)
	if !ok {
		return nil
	}
	return m.mod
}

// wantLeakFrames is leakFrames for a module with symbols and lines.
func wantLeakFrames(t *testing.T) []string {
	src := filepath.Join(fixtureDir, "leak.c")
	return []string{
		"leak_a leak.c:" + strconv.Itoa(tagLine(t, src, "LEAK_A")),
		"leak_b leak.c:" + strconv.Itoa(tagLine(t, src, "LEAK_B")),
		"memtrace::leak_c() leak.c:" + strconv.Itoa(tagLine(t, src, "LEAK_C")),
	}
}

var strippedLeakFrames = []string{" :0", " :0", " :0"}

func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A stripped executable resolves through its debug file found by build-id
// under a configured debug directory; a debug file with another build-id at
// that path is refused.
func TestDebugFileByBuildID(t *testing.T) {
	needTool(t, "gcc")
	needTool(t, "objcopy")
	dir := tempDir(t)
	bin := buildFixture(t, dir, "leak", "-O2", "-g")
	other := buildFixture(t, dir, "other", "-O1", "-g")
	stripped := stripCopy(t, bin, "leak-stripped")
	id := buildIDOf(t, bin)
	if buildIDOf(t, other) == id {
		t.Fatal("two builds with one build-id")
	}

	debugDir := filepath.Join(dir, "debug")
	dbg := filepath.Join(debugDir, ".build-id", id[:2], id[2:]+".debug")
	if err := os.MkdirAll(filepath.Dir(dbg), 0o755); err != nil {
		t.Fatal(err)
	}

	t.Run("right build-id", func(t *testing.T) {
		run(t, "objcopy", "--only-keep-debug", bin, dbg)
		fx := startFixture(t, stripped)
		r := NewResolver(WithDebugDirs(filepath.Join(dir, "none"), debugDir))
		defer r.Close()
		if got, want := leakFrames(t, r, fx), wantLeakFrames(t); !sameStrings(got, want) {
			t.Errorf("frames %q, want %q", got, want)
		}
		if m := r.moduleOf(fx.pid(), fx.addr("LEAK_A")); m == nil || m.DebugFile() != dbg {
			t.Errorf("debug file not %s", dbg)
		}
	})
	t.Run("wrong build-id", func(t *testing.T) {
		run(t, "objcopy", "--only-keep-debug", other, dbg)
		fx := startFixture(t, stripped)
		r := NewResolver(WithDebugDirs(debugDir))
		defer r.Close()
		if got := leakFrames(t, r, fx); !sameStrings(got, strippedLeakFrames) {
			t.Errorf("frames %q from a debug file of another build", got)
		}
	})
	t.Run("default directories do not have it", func(t *testing.T) {
		fx := startFixture(t, stripped)
		r := NewResolver()
		defer r.Close()
		if got := leakFrames(t, r, fx); !sameStrings(got, strippedLeakFrames) {
			t.Errorf("frames %q", got)
		}
	})
}

// A .gnu_debuglink is followed to the module's directory, its .debug/
// subdirectory and DEBUGDIR/<module's directory>/, and the CRC must match.
func TestDebugLink(t *testing.T) {
	needTool(t, "gcc")
	needTool(t, "objcopy")
	tests := []struct {
		name    string
		where   func(dir, debugDir string) string // the debug file's directory
		corrupt bool
	}{
		{"same directory", func(dir, _ string) string { return dir }, false},
		{".debug subdirectory", func(dir, _ string) string { return filepath.Join(dir, ".debug") }, false},
		{"global debug directory", func(dir, debugDir string) string { return filepath.Join(debugDir, dir) }, false},
		{"CRC mismatch", func(dir, _ string) string { return dir }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := tempDir(t)
			debugDir := filepath.Join(tempDir(t), "debug")
			// Built without build-id, so only the link can find the file.
			bin := buildFixture(t, dir, "leak.full", "-O2", "-g", "-Wl,--build-id=none")
			where := tc.where(dir, debugDir)
			if err := os.MkdirAll(where, 0o755); err != nil {
				t.Fatal(err)
			}
			dbg := filepath.Join(where, "leak.debug")
			run(t, "objcopy", "--only-keep-debug", bin, dbg)
			stripped := filepath.Join(dir, "leak")
			run(t, "strip", "--strip-all", "-o", stripped, bin)
			run(t, "objcopy", "--add-gnu-debuglink="+dbg, stripped)
			if err := os.Remove(bin); err != nil {
				t.Fatal(err)
			}
			if tc.corrupt {
				f, err := os.OpenFile(dbg, os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				f.Write([]byte{0})
				f.Close()
			}
			fx := startFixture(t, stripped)
			r := NewResolver(WithDebugDirs(debugDir))
			defer r.Close()
			want := wantLeakFrames(t)
			if tc.corrupt {
				want = strippedLeakFrames
			}
			if got := leakFrames(t, r, fx); !sameStrings(got, want) {
				t.Errorf("frames %q, want %q", got, want)
			}
		})
	}
}

// MiniDebugInfo names the functions a stripped executable's .dynsym lacks.
func TestMiniDebugInfo(t *testing.T) {
	for _, tool := range []string{"gcc", "objcopy", "strip", "xz"} {
		needTool(t, tool)
	}
	dir := tempDir(t)
	bin := buildFixture(t, dir, "leak.full", "-O2", "-g")
	mini := filepath.Join(dir, "mini")
	// Keep only the symbol table (no DWARF): what the recipe keeps.
	run(t, "objcopy", "--only-keep-debug", "--strip-debug", "--remove-section", ".comment", bin, mini)
	run(t, "xz", "-f", mini)
	prog := filepath.Join(dir, "leak")
	run(t, "strip", "--strip-all", "-o", prog, bin)
	run(t, "objcopy", "--add-section", ".gnu_debugdata="+mini+".xz", prog)

	fx := startFixture(t, prog)
	r := NewResolver(WithDebugDirs())
	defer r.Close()
	want := []string{"leak_a :0", "leak_b :0", "memtrace::leak_c() :0"}
	if got := leakFrames(t, r, fx); !sameStrings(got, want) {
		t.Errorf("frames %q, want %q", got, want)
	}
}

func TestParseDebugLink(t *testing.T) {
	link := func(name string, crc uint32) []byte {
		b := append([]byte(name), 0)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
		return binary.LittleEndian.AppendUint32(b, crc)
	}
	tests := []struct {
		name string
		in   []byte
		want debugLink
		ok   bool
	}{
		{"plain", link("libc.so.6.debug", 0xdeadbeef), debugLink{"libc.so.6.debug", 0xdeadbeef}, true},
		{"name of 3 bytes", link("a.b", 7), debugLink{"a.b", 7}, true},
		{"path", link("../../etc/passwd", 1), debugLink{}, false},
		{"dot dot", link("..", 1), debugLink{}, false},
		{"empty name", link("", 1), debugLink{}, false},
		{"no CRC", []byte("x.debug\x00"), debugLink{}, false},
		{"no NUL", []byte("x.debug"), debugLink{}, false},
		{"nothing", nil, debugLink{}, false},
	}
	for _, tc := range tests {
		got, ok := parseDebugLink(tc.in, binary.LittleEndian)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: parseDebugLink = %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestDebugCandidatePaths(t *testing.T) {
	got := debugCandidatePaths("abcdef12", debugLink{name: "prog.debug"}, "/opt/app/bin/prog", []string{"/usr/lib/debug", "/d2"})
	want := []string{
		"/usr/lib/debug/.build-id/ab/cdef12.debug",
		"/d2/.build-id/ab/cdef12.debug",
		"/opt/app/bin/prog.debug",
		"/opt/app/bin/.debug/prog.debug",
		"/usr/lib/debug/opt/app/bin/prog.debug",
		"/d2/opt/app/bin/prog.debug",
	}
	var paths []string
	for _, c := range got {
		paths = append(paths, c.path)
	}
	if !sameStrings(paths, want) {
		t.Errorf("paths %q, want %q", paths, want)
	}
	// A build-id that is no hex string names no path.
	if got := debugCandidatePaths("../x", debugLink{}, "/p", []string{"/d"}); len(got) != 0 {
		t.Errorf("paths for a bad build-id: %v", got)
	}
}

// xz refuses streams whose dictionary would make the decoder allocate
// gigabytes, before decoding.
func TestMiniDebugInfoBounds(t *testing.T) {
	needTool(t, "xz")
	dir := tempDir(t)
	in := filepath.Join(dir, "in")
	if err := os.WriteFile(in, []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, "xz", "-k", "-f", in)
	packed, err := os.ReadFile(in + ".xz")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkXZDicts(packed); err != nil {
		t.Fatalf("checkXZDicts(xz output) = %v", err)
	}
	if _, err := unpackMiniDebugInfo(packed); err == nil {
		t.Error("unpacked a non-ELF payload into a module")
	}
	// Raise the LZMA2 dictionary code of the first block header to 40
	// (4 GiB); the header CRC is not what the check looks at.
	huge := append([]byte(nil), packed...)
	hdr := huge[12:]
	size := (int(hdr[0]) + 1) * 4
	for i := 2; i+2 < size; i++ {
		if hdr[i] == 0x21 && hdr[i+1] == 1 {
			hdr[i+2] = 40
			break
		}
	}
	if err := checkXZDicts(huge); err == nil {
		t.Error("checkXZDicts accepted a 4 GiB dictionary")
	}
	for _, bad := range [][]byte{nil, []byte("\xfd7zXZ\x00"), packed[:len(packed)-1], packed[:20]} {
		if err := checkXZDicts(bad); err == nil {
			t.Errorf("checkXZDicts(%q) accepted", bad)
		}
	}
}

// pivotScript runs a program as a container does: in a new mount
// namespace, on a tmpfs made its root with pivot_root. $1 is the mount point, $2 the tree to copy there, $3 the
// program. From outside, the program's files exist nowhere but under
// /proc/PID/root (and map_files).
const pivotScript = `set -e
mount -t tmpfs tmpfs "$1"
cp -a "$2"/. "$1"/
cd "$1"
mkdir .old
pivot_root . .old
exec "$3"
`

// copyWithLibs copies bin into root as /NAME with the libraries ldd lists,
// at their paths.
func copyWithLibs(t *testing.T, bin, root string) string {
	t.Helper()
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		t.Skipf("ldd %s: %v", bin, err)
	}
	copyTo := func(from, to string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range strings.Split(string(out), "\n") {
		for _, f := range strings.Fields(l) {
			if strings.HasPrefix(f, "/") {
				copyTo(f, filepath.Join(root, f))
				if real, err := filepath.EvalSymlinks(f); err == nil && real != f {
					copyTo(real, filepath.Join(root, real))
				}
			}
		}
	}
	name := "/" + filepath.Base(bin)
	copyTo(bin, filepath.Join(root, name))
	return name
}

// A process in a chroot, and one in another mount namespace whose root
// is unreachable from ours (a container). /proc/PID/maps names a chrooted
// process's files as we see them, but a container's as it sees them:
// modules resolve through /proc/PID/map_files, else by name under
// /proc/PID/root (inode checked), then ours; debug files are looked for
// under /proc/PID/root first.
func TestResolveInOtherRoot(t *testing.T) {
	for _, tool := range []string{"gcc", "objcopy", "chroot", "ldd"} {
		needTool(t, tool)
	}
	if os.Geteuid() != 0 {
		t.Skip("chroot needs root")
	}
	for _, container := range []bool{false, true} {
		name := "chroot"
		if container {
			name = "mount namespace"
			for _, tool := range []string{"unshare", "pivot_root", "mount", "sh", "cp"} {
				needTool(t, tool)
			}
		}
		t.Run(name, func(t *testing.T) {
			dir := tempDir(t)
			bin := buildFixture(t, dir, "leak", "-O2", "-g")
			root := filepath.Join(dir, "root")
			// The debug file only inside the root, the program stripped.
			id := buildIDOf(t, bin)
			dbgInRoot := filepath.Join("/usr/lib/debug/.build-id", id[:2], id[2:]+".debug")
			if err := os.MkdirAll(filepath.Join(root, filepath.Dir(dbgInRoot)), 0o755); err != nil {
				t.Fatal(err)
			}
			run(t, "objcopy", "--only-keep-debug", bin, filepath.Join(root, dbgInRoot))
			stripped := stripCopy(t, bin, "leak-stripped")
			prog := copyWithLibs(t, stripped, root)

			var fx *fixture
			wantModule := filepath.Join(root, prog)
			if container {
				mnt := filepath.Join(dir, "mnt")
				if err := os.Mkdir(mnt, 0o755); err != nil {
					t.Fatal(err)
				}
				fx = startFixture(t, "unshare", "-m", "--propagation", "private", "sh", "-c", pivotScript, "sh", mnt, root, prog)
				wantModule = prog
			} else {
				fx = startFixture(t, "chroot", root, prog)
			}
			r := NewResolver()
			defer r.Close()
			if got, want := leakFrames(t, r, fx), wantLeakFrames(t); !sameStrings(got, want) {
				t.Errorf("frames %q, want %q", got, want)
			}
			if f := r.Resolve(fx.pid(), fx.addr("LEAK_A")); f.Module != wantModule {
				t.Errorf("module %q, want %q", f.Module, wantModule)
			}

			// Without map_files: by name, under /proc/PID/root for the
			// container, the inode checked.
			maps, err := readProcMaps(fx.pid())
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, m := range maps {
				if m.Path != wantModule || !m.Executable() {
					continue
				}
				found = true
				fake := m
				fake.Start, fake.End = 1, 2 // no such map_files entry
				r2 := NewResolver()
				defer r2.Close()
				mod := r2.moduleFor(fx.pid(), fake, processRoots(fx.pid()))
				if mod == nil {
					t.Fatalf("%s not reached by name", m.Path)
				}
				wantDebug := "/proc/" + strconv.Itoa(fx.pid()) + "/root" + dbgInRoot
				if got := mod.DebugFile(); got != wantDebug {
					t.Errorf("debug file %q, want %q", got, wantDebug)
				}
				fake.Inode++
				r3 := NewResolver()
				defer r3.Close()
				if mod := r3.moduleFor(fx.pid(), fake, processRoots(fx.pid())); mod != nil {
					t.Errorf("a file with another inode was taken for %s", m.Path)
				}
			}
			if !found {
				t.Errorf("no executable mapping of %s", wantModule)
			}
		})
	}
}
