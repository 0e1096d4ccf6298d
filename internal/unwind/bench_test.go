package unwind

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gofmtPath is the Go toolchain's gofmt ("" when go is not found: skipped).
var gofmtPath = func() string {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return ""
	}
	return filepath.Join(strings.TrimSpace(string(out)), "bin", "gofmt")
}()

// benchFiles are the files the build benchmarks measure: glibc, libstdc++,
// libsqlite3, two files over 100 MB from Debian packages (libLLVM-14:
// 110 MB with a 5 MB .eh_frame; chromium: 297 MB, 0.4 MB .eh_frame), node
// and OpenJDK 17's libjvm.so (the big binaries), and a
// Go program whose rows come from its function table (gofmt: no DWARF).
var benchFiles = []struct{ name, path string }{
	{"libc", libc},
	{"libstdc++", libstdcxx},
	{"libsqlite3", libsqlite},
	{"libLLVM-14", libLLVM},
	{"chromium", chromium},
	{"node", node},
	{"libjvm", libjvm},
	{"gofmt", gofmtPath},
}

// BenchmarkBuild: time and memory to build one file's table from its
// open ELF file (opening it is not counted), and the rows it has.
func BenchmarkBuild(b *testing.B) {
	for _, bf := range benchFiles {
		b.Run(bf.name, func(b *testing.B) {
			needFile(b, bf.path)
			f := openELF(b, bf.path)
			var rows int
			b.ReportAllocs()
			for b.Loop() {
				tab, err := Build(f)
				if err != nil {
					b.Fatal(err)
				}
				rows = len(tab.Rows)
			}
			b.ReportMetric(float64(rows), "rows")
			b.ReportMetric(float64(rows*RowSize), "encoded-bytes")
		})
	}
}

// BenchmarkCacheHit: a table found in memory (a second process mapping
// the same file) and on disk (a second run of memtrace).
func BenchmarkCacheHit(b *testing.B) {
	for _, bf := range benchFiles {
		b.Run(bf.name+"/memory", func(b *testing.B) {
			needFile(b, bf.path)
			c := NewCache(nil)
			cachedTable(b, c, bf.path)
			b.ReportAllocs()
			for b.Loop() {
				cachedTable(b, c, bf.path)
			}
		})
		b.Run(bf.name+"/disk", func(b *testing.B) {
			needFile(b, bf.path)
			dir := b.TempDir()
			cachedTable(b, NewCache(testStore(b, dir)), bf.path)
			if n := len(cacheFiles(b, dir)); n != 1 {
				b.Fatalf("%d cache files", n)
			}
			b.ReportAllocs()
			for b.Loop() {
				c := NewCache(testStore(b, dir))
				cachedTable(b, c, bf.path)
				if c.builds.Load() != 0 {
					b.Fatal("built instead of read")
				}
			}
		})
	}
}
