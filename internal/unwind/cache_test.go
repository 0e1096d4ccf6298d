package unwind

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/memtrace/memtrace/internal/diskcache"
)

func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err == nil {
		err = os.WriteFile(dst, b, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func cacheFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// testStore is a cache directory of 64 MiB.
func testStore(t testing.TB, dir string) *diskcache.Store {
	t.Helper()
	s, err := diskcache.Open(dir, 64<<20, 1)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func cachedTable(t testing.TB, c *Cache, path string) *Table {
	t.Helper()
	tab, err := c.Table(path)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// TestCacheDisk: a second cache on the same directory reads the table
// instead of building it, and what it reads equals a fresh Build.
func TestCacheDisk(t *testing.T) {
	needFile(t, libc)
	dir := t.TempDir()
	fresh := buildFile(t, libc)

	first := NewCache(testStore(t, dir))
	if got := cachedTable(t, first, libc); !reflect.DeepEqual(got, fresh) {
		t.Fatal("first cache: table differs from Build")
	}
	files := cacheFiles(t, dir)
	if len(files) != 1 || !strings.HasPrefix(filepath.Base(files[0]), cfiVersion) {
		t.Fatalf("cache files %v, want one %s…", files, cfiVersion)
	}

	second := NewCache(testStore(t, dir))
	got := cachedTable(t, second, libc)
	if n := second.builds.Load(); n != 0 {
		t.Errorf("second cache built %d tables, want 0", n)
	}
	if !reflect.DeepEqual(got, fresh) {
		t.Error("table read from disk differs from Build")
	}
	if again := cachedTable(t, second, libc); again != got {
		t.Error("second call did not return the memoized table")
	}

	// Corrupt files are ignored, rebuilt and replaced.
	for _, corrupt := range []func([]byte) []byte{
		func(b []byte) []byte { return b[:len(b)/2] },
		func(b []byte) []byte { b[len(b)/2] ^= 1; return b },
		func(b []byte) []byte { return nil },
		func(b []byte) []byte { return []byte("MTCACHE1 garbage") },
	} {
		b, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(files[0], corrupt(b), 0o644); err != nil {
			t.Fatal(err)
		}
		c := NewCache(testStore(t, dir))
		if got := cachedTable(t, c, libc); !reflect.DeepEqual(got, fresh) {
			t.Error("rebuilt table differs from Build")
		}
		if n := c.builds.Load(); n != 1 {
			t.Errorf("corrupt file: %d builds, want 1", n)
		}
		b, err = testStore(t, dir).Get(filepath.Base(files[0]))
		if err != nil {
			t.Fatalf("cache file not rewritten: %v", err)
		}
		if tab, err := Decode(b); err != nil || !reflect.DeepEqual(tab, fresh) {
			t.Errorf("cache file rewritten wrong: %v", err)
		}
	}
	if files := cacheFiles(t, dir); len(files) != 1 {
		t.Errorf("cache files %v: temporary files left behind", files)
	}
}

// TestCacheKeys: copies with one build-id share a table; files without a
// build-id are told apart by identity; a debug file is not its program.
func TestCacheKeys(t *testing.T) {
	needTool(t, "objcopy")
	dir := t.TempDir()
	withID := compile(t, "frames.c", "frames", "-O2", "-g", "-Wl,--build-id")
	copyID := filepath.Join(t.TempDir(), "copy")
	copyFile(t, withID, copyID)
	debug := filepath.Join(t.TempDir(), "frames.debug")
	run(t, "objcopy", "--only-keep-debug", withID, debug)
	noID := compile(t, "frames.c", "frames", "-O2", "-Wl,--build-id=none")
	noIDFP := compile(t, "frames.c", "frames", "-O2", "-fno-omit-frame-pointer", "-Wl,--build-id=none")

	c := NewCache(nil)
	a := cachedTable(t, c, withID)
	if b := cachedTable(t, c, copyID); b != a {
		t.Error("a copy with the same build-id was built again")
	}
	if n := c.builds.Load(); n != 1 {
		t.Errorf("%d builds, want 1", n)
	}
	if d := cachedTable(t, c, debug); reflect.DeepEqual(d, a) || !reflect.DeepEqual(d, buildFile(t, debug)) {
		t.Error("the debug file got its program's table")
	}
	x := cachedTable(t, NewCache(testStore(t, dir)), noID)
	if !reflect.DeepEqual(x, buildFile(t, noID)) {
		t.Error("table of a file without build-id differs from Build")
	}
	// Replace the file: new identity, new table.
	copyFile(t, noIDFP, noID)
	y := cachedTable(t, NewCache(testStore(t, dir)), noID)
	if !reflect.DeepEqual(y, buildFile(t, noIDFP)) {
		t.Error("replaced file: stale table")
	}
	if _, err := c.Table(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file: no error")
	}
}

// TestCacheConcurrent: concurrent callers share one build.
func TestCacheConcurrent(t *testing.T) {
	needFile(t, libstdcxx)
	c := NewCache(testStore(t, t.TempDir()))
	var wg sync.WaitGroup
	tabs := make([]*Table, 8)
	for i := range tabs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tab, err := c.Table(libstdcxx)
			if err != nil {
				t.Error(err)
			}
			tabs[i] = tab
		}()
	}
	wg.Wait()
	for _, tab := range tabs[1:] {
		if tab != tabs[0] {
			t.Fatal("callers got different tables")
		}
	}
	if n := c.builds.Load(); n != 1 {
		t.Errorf("%d builds, want 1", n)
	}
}

// TestCacheErrors: a file whose CFI is malformed fails the same way from
// memory; a file that is not ELF is tried again.
func TestCacheErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, minimalELF(".eh_frame", 0x4000, u32(0xfffffff5)), 0o644); err != nil {
		t.Fatal(err)
	}
	notELF := filepath.Join(dir, "text")
	if err := os.WriteFile(notELF, []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := NewCache(testStore(t, dir))
	for range 2 {
		if _, err := c.Table(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("malformed: err %v", err)
		}
		if _, err := c.Table(notELF); err == nil {
			t.Error("not ELF: no error")
		}
	}
	if n := c.builds.Load(); n != 1 {
		t.Errorf("%d builds, want 1 (the malformed file, once)", n)
	}
	if files := cacheFiles(t, dir); len(files) != 2 {
		t.Errorf("files %v: an error was stored on disk", files)
	}
}

// TestCacheDebugFile: a file stripped of all CFI takes the .debug_frame of
// its separate debug file, found by build-id.
func TestCacheDebugFile(t *testing.T) {
	needTool(t, "objcopy")
	full := compile(t, "frames.c", "frames", append(debugFrameFlags, "-nostartfiles", "-e", "main", "-Wl,--build-id")...)
	id := buildID(openELF(t, full))
	root := t.TempDir()
	debugDir := filepath.Join(root, ".build-id", id[:2])
	if err := os.MkdirAll(debugDir, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "objcopy", "--only-keep-debug", full, filepath.Join(debugDir, id[2:]+".debug"))
	stripped := full + ".stripped"
	run(t, "objcopy", "--strip-debug", full, stripped)
	if tab := buildFile(t, stripped); len(tab.Rows) != 0 {
		t.Fatalf("stripped file still has %d rows", len(tab.Rows))
	}

	c := NewCache(nil)
	c.debugRoot = root
	got := cachedTable(t, c, stripped)
	if want := buildFile(t, full); len(want.Rows) == 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("table from the debug file:\n got %v\nwant %v", got.Rows, want.Rows)
	}
	c = NewCache(nil)
	c.debugRoot = t.TempDir()
	if got := cachedTable(t, c, stripped); len(got.Rows) != 0 {
		t.Errorf("no debug file: %d rows", len(got.Rows))
	}
}
