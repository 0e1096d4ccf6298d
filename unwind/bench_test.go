package unwind

import (
	"testing"
)

// benchFiles are the files the build benchmarks measure: glibc, libstdc++,
// libsqlite3 and two files over 100 MB from Debian packages (libLLVM-14:
// 110 MB with a 5 MB .eh_frame; chromium: 297 MB, 0.4 MB .eh_frame).
var benchFiles = []struct{ name, path string }{
	{"libc", libc},
	{"libstdc++", libstdcxx},
	{"libsqlite3", libsqlite},
	{"libLLVM-14", libLLVM},
	{"chromium", chromium},
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
			c := NewCache("")
			cachedTable(b, c, bf.path)
			b.ReportAllocs()
			for b.Loop() {
				cachedTable(b, c, bf.path)
			}
		})
		b.Run(bf.name+"/disk", func(b *testing.B) {
			needFile(b, bf.path)
			dir := b.TempDir()
			cachedTable(b, NewCache(dir), bf.path)
			if n := len(cacheFiles(b, dir)); n != 1 {
				b.Fatalf("%d cache files", n)
			}
			b.ReportAllocs()
			for b.Loop() {
				c := NewCache(dir)
				cachedTable(b, c, bf.path)
				if c.builds.Load() != 0 {
					b.Fatal("built instead of read")
				}
			}
		})
	}
}
