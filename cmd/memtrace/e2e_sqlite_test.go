package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestSqliteAgreesWithHeaptrack runs Debian's sqlite3 on
// testdata/sqlite/workload.sql under memtrace and under heaptrack (also
// Debian's) and checks that allocation calls, bytes, frees, the peak and
// what is live at exit agree exactly (docs/heaptrack-comparison.md).
//
// heaptrack's LD_PRELOAD library pulls libstdc++ (and libunwind, libgcc_s,
// liblzma) into the C program; libstdc++'s initialiser allocates its
// exception-handling emergency pool (72704 bytes on Debian 12), which
// heaptrack records and frees again in its atexit handler
// (__gnu_cxx::__freeres). That block does not exist in an untraced run. So
// memtrace traces sqlite3 twice: as it is, and with libstdc++ preloaded as
// heaptrack does. The second run must equal heaptrack's figures to the byte,
// and the first must differ from it by exactly that one block.
func TestSqliteAgreesWithHeaptrack(t *testing.T) {
	needBPF(t)
	tools := map[string]string{}
	for _, tool := range []string{"sqlite3", "heaptrack", "heaptrack_print", "ldd"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI=true but %s is missing: .ci/run must install the Debian packages sqlite3 and heaptrack", tool)
			}
			t.Skipf("%s not installed (Debian packages: sqlite3 heaptrack)", tool)
		}
		tools[tool] = p
	}
	workload, err := filepath.Abs(filepath.Join("..", "..", "testdata", "sqlite", "workload.sql"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sqliteArgs := []string{"-batch", ":memory:", ".read '" + workload + "'"}

	// Untraced, for the output the traced runs must reproduce.
	plain, err := exec.Command(tools["sqlite3"], sqliteArgs...).Output()
	if err != nil || len(plain) == 0 {
		t.Fatalf("sqlite3 untraced: %v, output %q", err, plain)
	}

	// memtrace. Its reports go to a file: sqlite3 shares its stdout.
	traced := func(name string, prefix ...string) processRecord {
		ndjsonPath := filepath.Join(dir, name+".ndjson")
		args := append([]string{"--json", "--top", "0", "-o", ndjsonPath, "--"}, prefix...)
		r := runMemtrace(t, append(append(args, tools["sqlite3"]), sqliteArgs...)...)
		if r.code != 0 {
			t.Fatalf("memtrace exit %d, stderr:\n%s", r.code, r.stderr)
		}
		if r.stdout != string(plain) {
			t.Fatalf("sqlite3 under memtrace printed %q, untraced %q", r.stdout, plain)
		}
		ndjsonOut, err := os.ReadFile(ndjsonPath)
		if err != nil {
			t.Fatal(err)
		}
		mt := parseNDJSON(t, string(ndjsonOut)).finalProcess(t)
		if !mt.Exited || mt.LostEvents != 0 || mt.UnmatchedFrees != 0 {
			t.Fatalf("memtrace: exited=%v lost=%d unmatched=%d, want true 0 0", mt.Exited, mt.LostEvents, mt.UnmatchedFrees)
		}
		return mt
	}
	libstdcxx, err := exec.Command("g++", "-print-file-name=libstdc++.so.6").Output()
	if err != nil {
		t.Fatalf("find libstdc++: %v", err)
	}
	mt := traced("plain")
	mtPre := traced("preload", "/usr/bin/env", "LD_PRELOAD="+strings.TrimSpace(string(libstdcxx)))

	// heaptrack: -o X writes X.zst (X.gz when zstd is not installed).
	htCmd := exec.Command(tools["heaptrack"], append([]string{"-o", filepath.Join(dir, "heaptrack"), tools["sqlite3"]}, sqliteArgs...)...)
	htCmd.Dir = dir
	htOut, err := htCmd.CombinedOutput()
	if err != nil {
		t.Fatalf("heaptrack: %v\n%s", err, htOut)
	}
	if !bytes.Contains(htOut, plain) {
		t.Fatalf("sqlite3 under heaptrack did not print what it prints untraced:\n%s", htOut)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "heaptrack.*"))
	if len(files) != 1 {
		t.Fatalf("want one heaptrack data file, got %v; heaptrack said:\n%s", files, htOut)
	}
	dataFile := files[0]

	ht, err := readHeaptrack(dataFile)
	if err != nil {
		t.Fatal(err)
	}

	// Our reading of the file must agree with heaptrack's own summary.
	printOut, err := exec.Command(tools["heaptrack_print"], "-a", "0", "-p", "0", "-T", "0", "-l", "0", dataFile).CombinedOutput()
	if err != nil {
		t.Fatalf("heaptrack_print: %v\n%s", err, printOut)
	}
	sum, err := parseHeaptrackSummary(string(printOut))
	if err != nil {
		t.Fatalf("%v; heaptrack_print said:\n%s", err, printOut)
	}
	if sum.calls != ht.Allocs {
		t.Errorf("heaptrack_print counts %d calls, the data file %d", sum.calls, ht.Allocs)
	}
	if !sum.peak.covers(ht.Peak) {
		t.Errorf("heaptrack_print's peak %s does not round %d", sum.peak, ht.Peak)
	}
	if !sum.leaked.plus(sum.suppressed).covers(ht.LiveBytes) {
		t.Errorf("heaptrack_print's leaked %s + suppressed %s does not round %d", sum.leaked, sum.suppressed, ht.LiveBytes)
	}

	figures := func(p processRecord) heaptrackFigures {
		return heaptrackFigures{p.Allocs, p.AllocBytes, p.Frees, p.LiveAllocs, p.LiveBytes, p.PeakLiveBytes}
	}
	got, gotPre := figures(mt), figures(mtPre)
	t.Logf("%-22s %12s %12s %12s", "", "memtrace", "memtrace+pre", "heaptrack")
	for _, r := range []struct {
		name      string
		m, mp, ht uint64
	}{
		{"allocation calls", got.Allocs, gotPre.Allocs, ht.Allocs},
		{"bytes allocated", got.AllocBytes, gotPre.AllocBytes, ht.AllocBytes},
		{"frees", got.Frees, gotPre.Frees, ht.Frees},
		{"peak live bytes", got.Peak, gotPre.Peak, ht.Peak},
		{"live bytes at exit", got.LiveBytes, gotPre.LiveBytes, ht.LiveBytes},
		{"live blocks at exit", got.LiveAllocs, gotPre.LiveAllocs, ht.LiveAllocs},
	} {
		t.Logf("%-22s %12d %12d %12d", r.name, r.m, r.mp, r.ht)
	}
	t.Logf("heaptrack_print %s: %d calls, peak %s, leaked %s, suppressed %s", filepath.Base(dataFile), sum.calls, sum.peak, sum.leaked, sum.suppressed)
	t.Logf("memtrace+pre: sqlite3 with libstdc++ preloaded, as heaptrack's own library loads it")

	// With libstdc++ preloaded, sqlite3 makes exactly the calls it makes
	// under heaptrack: one more block than untraced, libstdc++'s pool.
	pool := gotPre.AllocBytes - got.AllocBytes
	if want := (heaptrackFigures{got.Allocs + 1, got.AllocBytes + pool, got.Frees,
		got.LiveAllocs + 1, got.LiveBytes + pool, got.Peak + pool}); gotPre != want || pool != 72704 {
		t.Errorf("preloaded run %+v, want the plain run plus one live block of 72704 bytes: %+v", gotPre, want)
	}
	// heaptrack: the same calls, bytes and peak as the preloaded run; its
	// atexit handler then frees the pool (__gnu_cxx::__freeres), so it ends
	// with one more free and the plain run's live blocks.
	if want := (heaptrackFigures{gotPre.Allocs, gotPre.AllocBytes, gotPre.Frees + 1,
		got.LiveAllocs, got.LiveBytes, gotPre.Peak}); *ht != want {
		t.Errorf("heaptrack %+v, want %+v", *ht, want)
	}
}

// heaptrackFigures are the totals of a heaptrack event stream, in the names
// memtrace uses.
type heaptrackFigures struct {
	Allocs, AllocBytes, Frees, LiveAllocs, LiveBytes, Peak uint64
}

// readHeaptrack reads an interpreted heaptrack data file (heaptrack 1.x,
// file format 1 to 3). The lines used, numbers in hex:
//
//	v VERSION FORMAT
//	s [LEN] STRING             string table, from 1 (LEN from format 3 on)
//	i IP MODULE [FRAMES...]    instruction pointer, from 1; MODULE is a string
//	t IP PARENT                backtrace node, from 1
//	a SIZE TRACE               allocation info (size, backtrace), from 0
//	+ INFO / - INFO            a block of that allocation info allocated / freed
//
// A realloc appears as "-" of the old block then "+" of the new one; frees
// of blocks heaptrack never saw allocated are dropped by heaptrack_interpret.
// The totals are those heaptrack_print summarises.
func readHeaptrack(path string) (*heaptrackFigures, error) {
	var in io.Reader
	var wait func() error
	switch {
	case strings.HasSuffix(path, ".gz"):
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		z, err := gzip.NewReader(f)
		if err != nil {
			return nil, err
		}
		in = z
	case strings.HasSuffix(path, ".zst"):
		cmd := exec.Command("zstd", "-dc", path)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("zstd (Debian package zstd): %w", err)
		}
		defer cmd.Process.Kill()
		in, wait = out, cmd.Wait
	default:
		return nil, fmt.Errorf("%s: not a .gz or .zst heaptrack file", path)
	}

	var (
		d        heaptrackFigures
		format   uint64
		strs     = []string{""}
		ipModule = []uint64{0}
		traceIP  = []uint64{0}
		infoSize []uint64
	)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		var err error
		bad := func(e error) error { return fmt.Errorf("%s:%d: %q: %v", path, n, line, e) }
		// num parses field i as hex; the first failure sticks in err.
		num := func(i int) uint64 {
			if err != nil {
				return 0
			}
			if i >= len(f) {
				err = bad(fmt.Errorf("field %d missing", i))
				return 0
			}
			v, e := strconv.ParseUint(f[i], 16, 64)
			if e != nil {
				err = bad(e)
			}
			return v
		}
		switch line[0] {
		case 'v':
			format = num(2)
		case 's':
			s := line[min(2, len(line)):]
			if format >= 3 {
				if i := strings.IndexByte(s, ' '); i >= 0 {
					s = s[i+1:]
				}
			}
			strs = append(strs, s)
		case 'i':
			ipModule = append(ipModule, num(2))
		case 't':
			traceIP = append(traceIP, num(1))
		case 'a':
			size, trace := num(1), num(2)
			if err != nil {
				break
			}
			if trace >= uint64(len(traceIP)) || traceIP[trace] >= uint64(len(ipModule)) || ipModule[traceIP[trace]] >= uint64(len(strs)) {
				return nil, bad(fmt.Errorf("dangling backtrace %d", trace))
			}
			infoSize = append(infoSize, size)
		case '+', '-':
			i := num(1)
			if err != nil {
				break
			}
			if i >= uint64(len(infoSize)) {
				return nil, bad(fmt.Errorf("unknown allocation info %d", i))
			}
			size := infoSize[i]
			if line[0] == '+' {
				d.Allocs++
				d.AllocBytes += size
				d.LiveAllocs++
				d.LiveBytes += size
				d.Peak = max(d.Peak, d.LiveBytes)
			} else {
				d.Frees++
				d.LiveAllocs--
				d.LiveBytes -= size
			}
		case 'A':
			return nil, bad(fmt.Errorf("heaptrack attached to a running process"))
		}
		if err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if wait != nil {
		if err := wait(); err != nil {
			return nil, fmt.Errorf("zstd -dc %s: %w", path, err)
		}
	}
	if format == 0 || d.Allocs == 0 {
		return nil, fmt.Errorf("%s: no version line or no allocations", path)
	}
	return &d, nil
}

// heaptrackSummary holds heaptrack_print's closing lines.
type heaptrackSummary struct {
	calls                    uint64
	peak, leaked, suppressed printedBytes
}

// printedBytes is a byte count as heaptrack_print writes it: "123B", or
// with two decimals in units of 1000 (not 1024): "1.23K", "19.05M".
type printedBytes struct {
	text  string
	value float64 // in bytes
	unit  float64 // 1 for B, 1000 for K, ...
}

func (p printedBytes) String() string { return p.text }

// covers reports whether exact rounds to p (half a unit of the last digit).
func (p printedBytes) covers(exact uint64) bool {
	tol := 0.0
	if p.unit > 1 {
		tol = 0.005*p.unit + 1e-6*p.unit
	}
	return math.Abs(float64(exact)-p.value) <= tol
}

// plus adds two printed values, keeping the larger rounding error.
func (p printedBytes) plus(q printedBytes) printedBytes {
	return printedBytes{p.text + "+" + q.text, p.value + q.value, 2 * max(p.unit, q.unit)}
}

var (
	summaryCalls = regexp.MustCompile(`(?m)^calls to allocation functions: (\d+)`)
	summaryBytes = regexp.MustCompile(`(?m)^(peak heap memory consumption|total memory leaked|suppressed leaks): ([0-9.]+)([BKMGT])$`)
)

func parseHeaptrackSummary(out string) (heaptrackSummary, error) {
	var s heaptrackSummary
	m := summaryCalls.FindStringSubmatch(out)
	if m == nil {
		return s, fmt.Errorf("no \"calls to allocation functions\" line")
	}
	s.calls, _ = strconv.ParseUint(m[1], 10, 64)
	s.suppressed = printedBytes{"0B", 0, 1} // printed only when non-zero
	found := 0
	for _, m := range summaryBytes.FindAllStringSubmatch(out, -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return s, err
		}
		unit := math.Pow(1000, float64(strings.Index("BKMGT", m[3])))
		p := printedBytes{m[2] + m[3], v * unit, unit}
		switch m[1] {
		case "peak heap memory consumption":
			s.peak = p
			found++
		case "total memory leaked":
			s.leaked = p
			found++
		default:
			s.suppressed = p
		}
	}
	if found != 2 {
		return s, fmt.Errorf("no peak or leaked line")
	}
	return s, nil
}
