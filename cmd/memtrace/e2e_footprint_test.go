package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/htmlreport/headless"
)

// footprintFields are the NDJSON footprint and mapping-state fields.
type footprintFields struct {
	Type      string `json:"type"`
	Category  string `json:"category"`
	Final     bool   `json:"final"`
	LiveBytes uint64 `json:"live_bytes"`
	Allocs    uint64 `json:"allocs"`
	Footprint struct {
		RSS           uint64 `json:"rss_bytes"`
		RSSAnon       uint64 `json:"rss_anon_bytes"`
		RSSFile       uint64 `json:"rss_file_bytes"`
		RSSShmem      uint64 `json:"rss_shmem_bytes"`
		HeapResident  uint64 `json:"heap_resident_bytes"`
		HeapRetained  uint64 `json:"heap_retained_bytes"`
		AnonResident  uint64 `json:"anon_resident_bytes"`
		StackResident uint64 `json:"stack_resident_bytes"`
		FileResident  uint64 `json:"file_resident_bytes"`
		Unexplained   uint64 `json:"unexplained_bytes"`
	} `json:"footprint"`
	Mmap struct {
		LiveBytes uint64 `json:"live_bytes"`
		Maps      uint64 `json:"maps"`
		mapState
	} `json:"mmap"`
	mapState
}

type mapState struct {
	Reserved  uint64 `json:"reserved_bytes"`
	Committed uint64 `json:"committed_bytes"`
	Resident  uint64 `json:"resident_bytes"`
}

// stdioBuffer is the block printf allocates for stdout before the
// fixtures' work: live, and not among the figures they print.
const stdioBuffer = 4096

// TestFootprintFixtures runs testdata/footprint.c's modes under memtrace.
// Each fixture reads its own /proc at its end and exits at once; memtrace
// reads it at its exit stop: one state, so the kernel's figures must
// agree exactly (RssFile apart: exiting maps code pages).
// rssLagBefore62 bounds how far /proc/PID/status's RSS can lag the page
// tables on kernels before 6.2 (SPLIT_RSS_COUNTING: 64 pages per thread
// not yet folded in), for the fixtures' few threads.
const rssLagBefore62 = 4 << 20

const pageSize = 4096

func TestFootprintFixtures(t *testing.T) {
	needBPF(t)
	tests := []struct {
		mode  string
		flags []string // gcc's: -ljemalloc links jemalloc in
		check func(t *testing.T, proc, site footprintFields, own map[string]uint64)
	}{{
		mode: "frag",
		check: func(t *testing.T, p, _ footprintFields, own map[string]uint64) {
			f := p.Footprint
			exact(t, "live_bytes", p.LiveBytes, own["live"]+stdioBuffer)
			exact(t, "heap_resident_bytes", f.HeapResident, own["heap_resident"])
			exact(t, "heap_retained_bytes", f.HeapRetained, f.HeapResident-p.LiveBytes)
			if f.HeapResident < own["must_keep"] {
				t.Errorf("heap_resident_bytes %d < %d, the pages live blocks touch", f.HeapResident, own["must_keep"])
			}
		},
	}, {
		mode: "reserve",
		check: func(t *testing.T, p, site footprintFields, own map[string]uint64) {
			want := mapState{Reserved: own["reserved"], Committed: own["committed"], Resident: own["resident"]}
			if p.Mmap.mapState != want || site.mapState != want {
				t.Errorf("mmap states: process %+v, site %+v, want %+v", p.Mmap.mapState, site.mapState, want)
			}
			exact(t, "mmap.live_bytes", p.Mmap.LiveBytes, own["reserved"])
			exact(t, "mmap.maps (MAP_FIXED inside the reservation is no new map)", p.Mmap.Maps, 1)
			exact(t, "anon_resident_bytes", p.Footprint.AnonResident, own["resident"])
		},
	}, {
		mode: "large",
		check: func(t *testing.T, p, _ footprintFields, own map[string]uint64) {
			exact(t, "live_bytes", p.LiveBytes, own["live"]+stdioBuffer)
			exact(t, "heap_resident_bytes", p.Footprint.HeapResident, own["heap_resident"])
		},
	}, {
		mode: "arenas",
		check: func(t *testing.T, p, _ footprintFields, own map[string]uint64) {
			// pthread_create allocates too (its threads' TLS): a little more.
			if p.LiveBytes < own["live"]+stdioBuffer || p.LiveBytes > own["live"]+2*stdioBuffer {
				t.Errorf("live_bytes = %d, want %d and a few hundred bytes", p.LiveBytes, own["live"]+stdioBuffer)
			}
			exact(t, "heap_resident_bytes ([heap] and the threads' arenas)", p.Footprint.HeapResident, own["heap_resident"])
			// The threads' stacks, mapped by pthread_create's traced mmap,
			// are found by their guard pages once the threads have ended.
			if kernelAtLeast(6, 2) {
				exact(t, "anon_resident_bytes", p.Footprint.AnonResident, 0)
			} else if p.Footprint.AnonResident > 4*pageSize {
				// Debian's 6.1 in the kernel matrix left 8 KiB of the ended
				// threads' stacks as mmap (cause not found; docs/footprint.md, "Limits").
				t.Errorf("anon_resident_bytes = %d, want at most %d before 6.2", p.Footprint.AnonResident, 4*pageSize)
			}
			if p.Footprint.StackResident < p.Mmap.Resident {
				t.Errorf("stack_resident_bytes %d < the stacks' mmap resident_bytes %d", p.Footprint.StackResident, p.Mmap.Resident)
			}
		},
	}, {
		mode:  "large",
		flags: []string{"-ljemalloc"},
		check: func(t *testing.T, p, _ footprintFields, own map[string]uint64) {
			// Every mapping of jemalloc's is heap: those of the live blocks,
			// which the fixture finds, and its metadata's: a few pages, or
			// a 2 MiB huge page where the kernel backs the region with one
			// (transparent huge pages "always": Debian's 6.1 in the kernel
			// matrix once read 2 MiB and 32 KiB).
			const metadata = 3 << 20
			h := p.Footprint.HeapResident
			if h < own["heap_resident"] || h > own["heap_resident"]+metadata {
				t.Errorf("heap_resident_bytes %d, want the live blocks' mappings' %d and at most 3 MiB of metadata", h, own["heap_resident"])
			}
		},
	}}
	for _, tc := range tests {
		name := tc.mode
		if len(tc.flags) > 0 {
			name += strings.Join(tc.flags, "")
		}
		t.Run(name, func(t *testing.T) {
			bin := fixture(t, "footprint.c", tc.flags...)
			r := runMemtrace(t, "--json", "--", bin, tc.mode)
			if r.code != 0 {
				t.Fatalf("exit %d\n%s", r.code, r.stderr)
			}
			own := fixtureFigures(r.stderr)
			var proc, site footprintFields
			sc := bufio.NewScanner(strings.NewReader(r.stdout))
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				if !strings.HasPrefix(sc.Text(), "{") {
					continue // the fixture's own line
				}
				var rec footprintFields
				if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
					t.Fatalf("%v: %s", err, sc.Bytes())
				}
				switch {
				case rec.Type == "process" && rec.Final:
					proc = rec
				case rec.Type == "callsite" && rec.Category == "mmap":
					site = rec
				}
			}
			f := proc.Footprint
			exact(t, "rss_anon_bytes", f.RSSAnon, own["rss_anon"])
			exact(t, "rss_shmem_bytes", f.RSSShmem, own["rss_shmem"])
			exact(t, "rss_bytes", f.RSS, f.RSSAnon+f.RSSFile+f.RSSShmem)
			sum := f.HeapResident + f.AnonResident + f.StackResident + f.FileResident + f.Unexplained
			if kernelAtLeast(6, 2) {
				exact(t, "the breakdown's sum", sum, f.RSS)
			} else if d := int64(sum) - int64(f.RSS); d < 0 || d > rssLagBefore62 {
				// Before 6.2 each thread batches its RSS counts (up to 64
				// pages) before the mm's counters, which status reads, see
				// them; smaps walks the page tables. The sum may then exceed
				// RSS by that lag, never fall short.
				t.Errorf("the breakdown's sum %d - RSS %d = %d, want 0..%d (kernels before 6.2)", sum, f.RSS, d, rssLagBefore62)
			}
			if f.Unexplained*50 > f.RSS {
				t.Errorf("unexplained %d > 2%% of RSS %d", f.Unexplained, f.RSS)
			}
			tc.check(t, proc, site, own)
			if t.Failed() {
				t.Logf("fixture's own reading: %v\nstdout:\n%s", own, r.stdout)
			}
		})
	}
}

// fixtureFigures parses the "key value" lines a fixture printed.
func fixtureFigures(stderr string) map[string]uint64 {
	m := map[string]uint64{}
	for _, l := range strings.Split(stderr, "\n") {
		k, v, ok := strings.Cut(l, " ")
		if n, err := strconv.ParseUint(v, 10, 64); ok && err == nil {
			m[k] = n
		}
	}
	return m
}

func exact(t *testing.T, what string, got, want uint64) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %d, want %d", what, got, want)
	}
}

// finalRecords returns the final process record and the mmap call site
// of an NDJSON output (the fixture's own lines skipped), as raw JSON
// objects so that every field is compared.
func finalRecords(t *testing.T, out string) (proc, site map[string]any) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if !strings.HasPrefix(sc.Text(), "{") {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		switch {
		case m["type"] == "process" && m["final"] == true:
			proc = m
		case m["type"] == "callsite" && m["category"] == "mmap":
			site = m
		}
	}
	return proc, site
}

// TestFootprintReplay: a recorded run's replay shows the footprint the
// live run showed (the reading is recorded), mapping states included.
func TestFootprintReplay(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "footprint.c")
	rec := filepath.Join(t.TempDir(), "run.rec")
	live := runMemtrace(t, "--json", "--record", rec, "--", bin, "reserve")
	if live.code != 0 {
		t.Fatalf("exit %d\n%s", live.code, live.stderr)
	}
	replayed := runMemtrace(t, "replay", rec, "--json")
	if replayed.code != 0 {
		t.Fatalf("replay exit %d\n%s", replayed.code, replayed.stderr)
	}
	lp, ls := finalRecords(t, live.stdout)
	rp, rs := finalRecords(t, replayed.stdout)
	if lp == nil || rp == nil || ls == nil || rs == nil {
		t.Fatalf("missing records:\nlive:\n%s\nreplay:\n%s", live.stdout, replayed.stdout)
	}
	if f := lp["footprint"].(map[string]any); f["rss_bytes"].(float64) == 0 {
		t.Fatalf("the live run has no footprint: %v", f)
	}
	if !reflect.DeepEqual(lp["footprint"], rp["footprint"]) || !reflect.DeepEqual(lp["mmap"], rp["mmap"]) {
		t.Errorf("footprint or mmap differ:\nlive   %v %v\nreplay %v %v", lp["footprint"], lp["mmap"], rp["footprint"], rp["mmap"])
	}
	for _, k := range []string{"reserved_bytes", "committed_bytes", "resident_bytes"} {
		if ls[k] != rs[k] {
			t.Errorf("mmap site %s: live %v, replay %v", k, ls[k], rs[k])
		}
	}
}

// TestHostFootprint: whole host, the fragmentation fixture (started after
// memtrace, so its blocks are all seen) is read at the final report while
// it waits, with --sort rss; its footprint must be its own /proc reading.
func TestHostFootprint(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "footprint.c")
	h := startHost(t, "--comm", filepath.Base(bin)[:min(15, len(filepath.Base(bin)))], "--sample-bytes", "0", "--sort", "rss")
	fx := exec.Command(bin, "frag", "hold")
	stdin, _ := fx.StdinPipe()
	stderr, _ := fx.StderrPipe()
	if err := fx.Start(); err != nil {
		t.Fatal(err)
	}
	defer fx.Wait()
	defer stdin.Close()
	// Its exec seen and its libc probed (no process matched --comm before).
	h.waitFor(t, "msg=probed pid="+strconv.Itoa(fx.Process.Pid)+" ")
	io.WriteString(stdin, "go\n")
	var own strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() && sc.Text() != "ready" {
		own.WriteString(sc.Text() + "\n")
	}
	h.stop(t)
	figures := fixtureFigures(own.String())
	var p footprintFields
	var sort string
	for _, l := range strings.Split(h.stdout.String(), "\n") {
		var rec struct {
			footprintFields
			PID  int    `json:"pid"`
			Sort string `json:"sort"`
		}
		if json.Unmarshal([]byte(l), &rec) != nil {
			continue
		}
		switch {
		case rec.Type == "report" && rec.Final:
			sort = rec.Sort
		case rec.Type == "process" && rec.Final && rec.PID == fx.Process.Pid:
			p = rec.footprintFields
		}
	}
	if sort != "rss" {
		t.Errorf("final report sort %q, want rss", sort)
	}
	f := p.Footprint
	// stdout's buffer was allocated before the wait: seen or not, depending
	// on whether the fixture's libc was probed by then.
	if p.LiveBytes != figures["live"] && p.LiveBytes != figures["live"]+stdioBuffer {
		t.Errorf("live_bytes = %d, want %d (+ %d)", p.LiveBytes, figures["live"], stdioBuffer)
	}
	exact(t, "rss_anon_bytes", f.RSSAnon, figures["rss_anon"])
	exact(t, "heap_resident_bytes", f.HeapResident, figures["heap_resident"])
	exact(t, "heap_retained_bytes", f.HeapRetained, f.HeapResident-p.LiveBytes)
	if f.Unexplained*50 > f.RSS {
		t.Errorf("unexplained %d > 2%% of RSS %d", f.Unexplained, f.RSS)
	}
	if t.Failed() {
		t.Logf("fixture: %v\nmemtrace:\n%s\n%s", figures, h.stdout.String(), h.errors())
	}
}

// TestFootprintHTML: the --html timeline draws the heap's resident bytes
// (readings once a second) as a line. The fragmentation fixture's heap
// grows to its end but for what malloc_trim gives back at the top (a few
// pages), so the line's highest point is its final reading within 1%.
func TestFootprintHTML(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "footprint.c")
	page := filepath.Join(t.TempDir(), "report.html")
	r := runMemtrace(t, "--json", "--html", page, "--", bin, "frag")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	p, _ := finalRecords(t, r.stdout)
	final := uint64(p["footprint"].(map[string]any)["heap_resident_bytes"].(float64))
	dom := headless.Load(t, page)
	if !strings.Contains(dom, `class="resident"`) {
		t.Fatalf("no resident line in the timeline")
	}
	m := regexp.MustCompile(`data-resident="(\d+)"`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the timeline has no data-resident")
	}
	if got, _ := strconv.ParseUint(m[1], 10, 64); got == 0 || got > final+final/100 {
		t.Errorf("timeline's highest heap resident %d, want in (0, %d + 1%%]", got, final)
	}
}
