package symbolize

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/arch/x86/x86asm"

	"github.com/memtrace/memtrace/internal/procfs"
)

// The benchmarks resolve 100 000 real return addresses (the ends of call
// instructions found by decoding every function) across libc, libstdc++
// (both mapped by a small C++ program) and a large binary:
// testdata/bigprog, a static Go executable of 16 MB (5 MB of code) with
// symbols and DWARF. Cold: a new resolver
// captures both processes and resolves every address once, reading
// symbols, line tables (libc's from libc6-dbg's debug file when installed)
// and inline information on the way. Warm: the same addresses again.
//
//	go test ./symbolize -run XXX -bench Resolve100k -benchtime 1x    # cold, one pass
//	go test ./symbolize -run XXX -bench Resolve100kWarm

const benchAddrs = 100_000

// benchTarget is an address to resolve in a process.
type benchTarget struct {
	pid int
	ret uint64
}

// startWaiting starts bin, waits for it to print a line starting with
// READY, and returns its pid; it exits when the benchmark ends.
func startWaiting(b *testing.B, bin string) int {
	b.Helper()
	cmd := exec.Command(bin)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || !strings.HasPrefix(line, "READY") {
		b.Fatalf("%s printed %q: %v", bin, line, err)
	}
	return cmd.Process.Pid
}

// startCXX builds and starts a C++ program that maps libstdc++ and libc.
func startCXX(b *testing.B) int {
	b.Helper()
	needTool(b, "g++")
	dir := tempDir(b)
	src := filepath.Join(dir, "wait.cc")
	prog := `#include <iostream>
#include <string>
int main() { std::string s; std::cout << "READY" << std::endl; std::getline(std::cin, s); }
`
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(dir, "wait")
	run(b, "g++", "-O2", "-o", bin, src)
	return startWaiting(b, bin)
}

// startBig builds and starts testdata/bigprog.
func startBig(b *testing.B) (int, string) {
	b.Helper()
	needTool(b, "go")
	bin := filepath.Join(tempDir(b), "bigprog")
	run(b, "go", "build", "-o", bin, "./testdata/bigprog")
	return startWaiting(b, bin), bin
}

// callReturns lists up to max return addresses (in pid) of the calls in
// the module of pid mapped from a path ending in suffix.
func callReturns(b *testing.B, pid int, suffix string, max int) []benchTarget {
	b.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		b.Fatal(err)
	}
	maps, err := procfs.ParseMaps(f)
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	var path string
	var start uint64
	for _, m := range maps {
		if strings.HasSuffix(m.Path, suffix) && m.Offset == 0 {
			path, start = m.Path, m.Start
			break
		}
	}
	if path == "" {
		b.Fatalf("process %d maps no %s", pid, suffix)
	}
	ef, err := elf.Open("/proc/" + strconv.Itoa(pid) + "/root" + path)
	if err != nil {
		b.Fatal(err)
	}
	defer ef.Close()
	var bias uint64
	var text []*elf.Prog
	for _, p := range ef.Progs {
		if p.Type != elf.PT_LOAD {
			continue
		}
		if p.Off == 0 {
			bias = start - p.Vaddr
		}
		if p.Flags&elf.PF_X != 0 {
			text = append(text, p)
		}
	}
	syms, _ := ef.Symbols()
	dyn, _ := ef.DynamicSymbols()
	seen := map[uint64]bool{}
	var out []benchTarget
	for _, s := range append(syms, dyn...) {
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Size == 0 || seen[s.Value] {
			continue
		}
		seen[s.Value] = true
		for _, p := range text {
			if s.Value < p.Vaddr || s.Value+s.Size > p.Vaddr+p.Filesz {
				continue
			}
			code := make([]byte, min(s.Size, 1<<16))
			if _, err := p.ReadAt(code, int64(s.Value-p.Vaddr)); err != nil && err != io.EOF {
				break
			}
			for off := 0; off < len(code); {
				if isEndbr(code[off:]) {
					off += 4
					continue
				}
				inst, err := x86asm.Decode(code[off:], 64)
				if err != nil || inst.Op == 0 {
					break
				}
				off += inst.Len
				if inst.Op == x86asm.CALL {
					out = append(out, benchTarget{pid: pid, ret: bias + s.Value + uint64(off)})
					if len(out) == max {
						return out
					}
				}
			}
		}
	}
	return out
}

// benchTargets collects the 100 000 addresses: a third from each module,
// the large binary making up what the libraries lack.
func benchTargets(b *testing.B) ([]benchTarget, []int) {
	cxx := startCXX(b)
	big, exe := startBig(b)
	libc := callReturns(b, cxx, "/libc.so.6", benchAddrs/3)
	libstdcxx := callReturns(b, cxx, "/libstdc++.so.6.0.30", benchAddrs/3)
	if len(libstdcxx) == 0 {
		libstdcxx = callReturns(b, cxx, "/libstdc++.so.6", benchAddrs/3)
	}
	inBig := callReturns(b, big, exe, benchAddrs-len(libc)-len(libstdcxx))
	b.Logf("%d distinct addresses: %d in libc, %d in libstdc++, %d in %s", len(libc)+len(libstdcxx)+len(inBig), len(libc), len(libstdcxx), len(inBig), filepath.Base(exe))
	all := append(append(libc, libstdcxx...), inBig...)
	// Fewer calls than asked for: the first ones again, up to 100 000.
	for i := 0; len(all) < benchAddrs; i++ {
		all = append(all, all[i])
	}
	// Interleave the modules, as a report's sites are.
	mixed := make([]benchTarget, 0, len(all))
	for i := 0; i < len(all); i++ {
		mixed = append(mixed, all[(i*7919)%len(all)])
	}
	return mixed, []int{cxx, big}
}

func resolveAll(b *testing.B, r *Resolver, targets []benchTarget) {
	for _, tg := range targets {
		if f := r.Resolve(tg.pid, tg.ret); f.Module == "" {
			b.Fatalf("Resolve(%d, %#x) = %s", tg.pid, tg.ret, showFrame(f))
		}
	}
}

// BenchmarkResolve100kCold: a fresh resolver per iteration; each
// iteration resolves all 100 000 addresses once.
func BenchmarkResolve100kCold(b *testing.B) {
	targets, pids := benchTargets(b)
	for b.Loop() {
		r := NewResolver()
		for _, pid := range pids {
			if err := r.Capture(pid); err != nil {
				b.Fatal(err)
			}
		}
		resolveAll(b, r, targets)
		r.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(targets)), "ns/addr")
}

// BenchmarkResolve100kWarm: every address resolved once before timing;
// each iteration resolves all 100 000 again.
func BenchmarkResolve100kWarm(b *testing.B) {
	targets, pids := benchTargets(b)
	r := NewResolver()
	defer r.Close()
	for _, pid := range pids {
		if err := r.Capture(pid); err != nil {
			b.Fatal(err)
		}
	}
	resolveAll(b, r, targets)
	for b.Loop() {
		resolveAll(b, r, targets)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(targets)), "ns/addr")
}

// jitBenchMap is a perf map of n functions of 0x100 bytes, as node's.
func jitBenchMap(n int) []byte {
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "%x 100 JS:*fn%d /srv/app/lib/module%d.js:%d:%d\n", 0x7f0000000000+uint64(i)*0x100, i, i%97, i%1000, i%80)
	}
	return b.Bytes()
}

// BenchmarkPerfMapParse: parsing a 100k-line perf map.
func BenchmarkPerfMapParse(b *testing.B) {
	data := jitBenchMap(100_000)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if syms, _, _, err := ParsePerfMap(data); err != nil || len(syms) != 100_000 {
			b.Fatal(len(syms), err)
		}
	}
}

// BenchmarkJITTable: building the table of a 100k-line map, adding lines
// to it, and a lookup in it.
func BenchmarkJITTable(b *testing.B) {
	syms, _, _, _ := ParsePerfMap(jitBenchMap(100_000))
	b.Run("add", func(b *testing.B) {
		for b.Loop() {
			var t jitTable
			t.add(syms, "m")
		}
	})
	// grow: 10 lines more on a 100k-line table, as a runtime adds them
	// (a full flattening every jitRecent lines).
	b.Run("grow", func(b *testing.B) {
		var t jitTable
		t.add(syms, "m")
		at := uint64(0x7f1000000000)
		for b.Loop() {
			more := make([]JITSymbol, 10)
			for i := range more {
				more[i] = JITSymbol{Start: at, Size: 0x100, Name: "JS:*more /srv/app/more.js:1:1"}
				at += 0x100
			}
			t.add(more, "m")
		}
	})
	b.Run("lookup", func(b *testing.B) {
		var t jitTable
		t.add(syms, "m")
		i := uint64(0)
		for b.Loop() {
			i = (i + 7919) % 100_000
			if _, ok := t.lookup(0x7f0000000000 + i*0x100 + 0x10); !ok {
				b.Fatal("miss")
			}
		}
	})
}
