// Package metrics serves what a trace holds over HTTP while it runs, for
// fleets: /metrics in Prometheus's text format and /debug/pprof/heap, the
// live heap as a pprof profile, where Parca and Pyroscope scrape. The
// session hands it a snapshot of the aggregate every period (Update);
// scrapes read the latest one and never touch the tracer.
package metrics

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/memtrace/memtrace/internal/access"
	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/pprofout"
	"github.com/memtrace/memtrace/internal/report"
	"github.com/memtrace/memtrace/internal/textsafe"
)

// ErrNotLoopback: the listen address is reachable from other hosts and the
// caller did not allow that. The data tells what processes do.
var ErrNotLoopback = errors.New("not a loopback address")

// Options configure a Server.
type Options struct {
	// Top bounds memtrace_callsite_live_bytes to this many call sites per
	// process (by live bytes), so the series' number stays bounded.
	Top int
	// Sources symbolize the call sites, for the function and module labels
	// and the pprof profile.
	Sources pprofout.Sources
	// Cgroup names a process's cgroup (label "cgroup"); read once per
	// process. Nil: the label is empty.
	Cgroup func(pid uint32) string
	// Start is when the trace began (the profile's duration).
	Start time.Time
}

// Server holds the latest snapshot and answers scrapes from it.
type Server struct {
	o Options

	mu      sync.Mutex
	snap    aggregate.Snapshot
	taken   time.Time
	cgroups map[uint32]string

	reg *prometheus.Registry
	srv *http.Server
	// access: each process's latest access epoch (--access).
	access map[uint32]access.Epoch
}

// New returns a Server with no data yet.
func New(o Options) *Server {
	s := &Server{o: o, cgroups: map[uint32]string{}, reg: prometheus.NewRegistry(), access: map[uint32]access.Epoch{}}
	s.reg.MustRegister(collector{s})
	return s
}

// Update replaces the data scrapes see. Processes that exited are left
// out: their series end, as a stopped exporter's do.
func (s *Server) Update(snap aggregate.Snapshot) {
	live := snap.Processes[:0:0]
	for _, p := range snap.Processes {
		if !p.Exited {
			live = append(live, p)
		}
	}
	snap.Processes = live
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snap, s.taken = snap, time.Now()
	keep := map[uint32]string{}
	for _, p := range live {
		c, ok := s.cgroups[p.PID]
		if !ok && s.o.Cgroup != nil {
			c = s.o.Cgroup(p.PID)
		}
		keep[p.PID] = c
	}
	s.cgroups = keep
	for pid := range s.access {
		if _, ok := keep[pid]; !ok {
			delete(s.access, pid)
		}
	}
}

// UpdateAccess replaces a process's access figures (its latest epoch).
func (s *Server) UpdateAccess(pid uint32, e access.Epoch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.access[pid] = e
}

func (s *Server) latest() (aggregate.Snapshot, time.Time, map[uint32]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snap, s.taken, s.cgroups
}

// latestAccess is pid's latest access epoch.
func (s *Server) latestAccess(pid uint32) (access.Epoch, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.access[pid]
	return e, ok
}

// Handler serves /metrics and /debug/pprof/heap.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/pprof/heap", s.serveHeap)
	return mux
}

func (s *Server) serveHeap(w http.ResponseWriter, _ *http.Request) {
	snap, taken, _ := s.latest()
	var buf bytes.Buffer
	if err := pprofout.Write(&buf, snap, s.o.Sources, pprofout.Options{Time: taken, Duration: taken.Sub(s.o.Start)}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="heap"`)
	w.Write(buf.Bytes())
}

// CheckAddress checks a listen address before anything is started: unless
// public is set, every address addr stands for must be a loopback address.
func CheckAddress(addr string, public bool) error {
	if public {
		_, _, err := net.SplitHostPort(addr)
		if err != nil {
			return fmt.Errorf("listen address %q: %w", addr, err)
		}
		return nil
	}
	return checkLoopback(addr)
}

// Listen opens a TCP listener on addr, checked as CheckAddress does.
func Listen(addr string, public bool) (net.Listener, error) {
	if err := CheckAddress(addr, public); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	return l, nil
}

func checkLoopback(addr string) error {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if h == "" {
		return fmt.Errorf("listen address %q means every interface: %w", addr, ErrNotLoopback)
	}
	ips, err := net.LookupIP(h)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return fmt.Errorf("listen address %q (%s): %w", addr, ip, ErrNotLoopback)
		}
	}
	return nil
}

// Serve answers on l until Close. It returns nil once closed.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	s.srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	srv := s.srv
	s.mu.Unlock()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve metrics: %w", err)
	}
	return nil
}

// Close stops serving.
func (s *Server) Close() error {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	return srv.Close()
}

var processLabels = []string{"pid", "comm", "cgroup"}

func desc(name, help string, extra ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, append(slices.Clone(processLabels), extra...), nil)
}

var (
	liveBytes      = desc("memtrace_live_bytes", "Heap bytes allocated and not freed.")
	liveBlocks     = desc("memtrace_live_blocks", "Heap blocks allocated and not freed.")
	allocations    = desc("memtrace_allocations_total", "Heap allocation calls (realloc included).")
	allocatedBytes = desc("memtrace_allocated_bytes_total", "Heap bytes allocated.")
	frees          = desc("memtrace_frees_total", "Heap blocks released.")
	freedBytes     = desc("memtrace_freed_bytes_total", "Heap bytes released.")
	peakLiveBytes  = desc("memtrace_peak_live_bytes", "Highest heap live bytes seen.")
	rateBytes      = desc("memtrace_rate_bytes_per_second", "Decaying average of heap bytes allocated, freed and net per second, per half-life.", "half_life", "kind")
	lostEvents     = desc("memtrace_lost_events_total", "Events the kernel could not hand over (ring buffer full); non-zero means the figures are incomplete.")
	siteLiveBytes  = desc("memtrace_callsite_live_bytes", "Heap live bytes of the top call sites, by function and module.", "function", "module")
	// The footprint, read from the kernel (package footprint).
	rssBytes       = desc("memtrace_rss_bytes", "Resident set size by the kernel's kind (anon, file, shmem), from /proc/PID/status.", "kind")
	residentBytes  = desc("memtrace_resident_bytes", "RSS by what holds it: heap_live, heap_retained, mmap, stacks, files, unexplained; go_heap and go_runtime for a Go program.", "part")
	mmapStateBytes = desc("memtrace_mmap_bytes", "Anonymous mappings made by traced mmap calls, by state: reserved, committed, resident.", "state")
	cgroupBytes    = desc("memtrace_cgroup_memory_bytes", "The process's cgroup's memory.current (v1: memory.usage_in_bytes).")

	// Resident memory by who made it resident (sampled page faults): estimates.
	residentEstimate  = desc("memtrace_resident_estimate_bytes", "Resident anonymous bytes, estimated from sampled page faults.")
	residentStderr    = desc("memtrace_resident_estimate_bytes_stderr", "Standard error of memtrace_resident_estimate_bytes.")
	siteResidentBytes = desc("memtrace_callsite_resident_bytes", "Resident anonymous bytes of the top call sites by who made them resident, by function and module (estimates).", "function", "module")
	// --access: the latest epoch's figures (docs/access.md). Blocks
	// smaller than a page share pages: touched is an upper bound, cold a
	// lower bound for them.
	accessBytes     = desc("memtrace_access_bytes", "Live heap and mmap bytes by access in the latest --access epoch: live, touched, written (absent when the kernel cannot tell), cold, never_touched.", "state")
	siteAccessBytes = desc("memtrace_callsite_access_bytes", "Access figures of the top call sites (by live bytes), by function, module and state (as memtrace_access_bytes).", "function", "module", "state")
)

// collector turns the latest snapshot into metrics at each scrape.
type collector struct{ s *Server }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{liveBytes, liveBlocks, allocations, allocatedBytes,
		frees, freedBytes, peakLiveBytes, rateBytes, lostEvents, siteLiveBytes,
		rssBytes, residentBytes, mmapStateBytes, cgroupBytes,
		residentEstimate, residentStderr, siteResidentBytes, accessBytes, siteAccessBytes} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	snap, _, cgroups := c.s.latest()
	for _, p := range snap.Processes {
		// The process chose its comm, and a delegated cgroup tree its
		// names: escaped (textsafe), they are valid UTF-8 without
		// controls, as label values must be. Site labels come escaped
		// from report.SiteLabels. A metric refused anyway is left out:
		// MustNewConstMetric would panic the scrape, and memtrace with it.
		lv := []string{strconv.FormatUint(uint64(p.PID), 10), textsafe.String(p.Comm), textsafe.String(cgroups[p.PID])}
		gauge := func(d *prometheus.Desc, v float64, extra ...string) {
			if m, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, v, append(slices.Clone(lv), extra...)...); err == nil {
				ch <- m
			}
		}
		counter := func(d *prometheus.Desc, v uint64) {
			if m, err := prometheus.NewConstMetric(d, prometheus.CounterValue, float64(v), lv...); err == nil {
				ch <- m
			}
		}
		gauge(liveBytes, float64(p.Heap.LiveBytes))
		gauge(liveBlocks, float64(p.Heap.LiveAllocs))
		counter(allocations, p.Heap.Allocs)
		counter(allocatedBytes, p.Heap.AllocBytes)
		counter(frees, p.Heap.Frees)
		counter(freedBytes, p.Heap.FreedBytes)
		gauge(peakLiveBytes, float64(p.PeakLiveBytes))
		counter(lostEvents, p.LostEvents)
		for _, r := range p.Rates {
			hl := report.HalfLifeText(r.HalfLife)
			gauge(rateBytes, r.AllocBytesPerSec, hl, "allocated")
			gauge(rateBytes, r.FreedBytesPerSec, hl, "freed")
			gauge(rateBytes, r.NetBytesPerSec, hl, "net")
		}
		for _, s := range c.s.topSites(p) {
			gauge(siteLiveBytes, float64(s.live), s.function, s.module)
		}
		if f := p.Footprint; f != nil {
			gauge(rssBytes, float64(f.RSSAnon), "anon")
			gauge(rssBytes, float64(f.RSSFile), "file")
			gauge(rssBytes, float64(f.RSSShmem), "shmem")
			live := min(p.Heap.LiveBytes, f.HeapResident)
			gauge(residentBytes, float64(live), "heap_live")
			gauge(residentBytes, float64(f.HeapResident-live), "heap_retained")
			gauge(residentBytes, float64(f.AnonResident), "mmap")
			gauge(residentBytes, float64(f.StackResident), "stacks")
			gauge(residentBytes, float64(f.FileResident), "files")
			if f.GoHeapSource != "" {
				gauge(residentBytes, float64(f.GoHeap.Resident), "go_heap")
				gauge(residentBytes, float64(f.GoRuntimeResident), "go_runtime")
			}
			gauge(residentBytes, float64(f.Unexplained), "unexplained")
			gauge(mmapStateBytes, float64(p.MappedState.Reserved), "reserved")
			gauge(mmapStateBytes, float64(p.MappedState.Committed), "committed")
			gauge(mmapStateBytes, float64(p.MappedState.Resident), "resident")
			gauge(cgroupBytes, float64(f.CgroupMemory))
		}
		if r := p.Resident; r != nil {
			gauge(residentEstimate, float64(r.Bytes))
			gauge(residentStderr, r.Stderr)
			for _, s := range c.s.topResident(p) {
				gauge(siteResidentBytes, float64(s.live), s.function, s.module)
			}
		}
		if e, ok := c.s.latestAccess(p.PID); ok {
			accessGauges(e.Process, func(v float64, state string) { gauge(accessBytes, v, state) })
			for _, s := range c.s.topAccess(p.PID, e) {
				accessGauges(s.f, func(v float64, state string) { gauge(siteAccessBytes, v, s.function, s.module, state) })
			}
		}
	}
}

// accessGauges gives one access figure set as gauges by state.
func accessGauges(f access.Figures, gauge func(v float64, state string)) {
	gauge(float64(f.Live), "live")
	gauge(float64(f.Touched), "touched")
	if f.WrittenKnown {
		gauge(float64(f.Written), "written")
	}
	gauge(float64(f.Cold), "cold")
	gauge(float64(f.NeverTouched), "never_touched")
}

type accessSeries struct {
	function, module string
	f                access.Figures
}

// topAccess sums an epoch's sites by (function, module) and keeps the
// Top largest by live bytes.
func (s *Server) topAccess(pid uint32, e access.Epoch) []accessSeries {
	by := map[[2]string]*access.Figures{}
	live := map[[2]string]uint64{}
	for _, site := range e.Sites {
		fn, _, mod := report.SiteLabels(s.o.Sources.Symbolizer, pid, site.Site.Address)
		k := [2]string{fn, mod}
		f := by[k]
		if f == nil {
			f = &access.Figures{WrittenKnown: site.WrittenKnown}
			by[k] = f
		}
		f.Add(site.Figures)
		live[k] = f.Live
	}
	top := s.topOf(live)
	out := make([]accessSeries, 0, len(top))
	for _, t := range top {
		out = append(out, accessSeries{t.function, t.module, *by[[2]string{t.function, t.module}]})
	}
	return out
}

// topResident sums the process's resident sites by (function, module) and
// keeps the Top largest.
func (s *Server) topResident(p aggregate.ProcessSnapshot) []siteSeries {
	byLabel := map[[2]string]uint64{}
	for _, site := range p.Resident.Sites {
		fn, _, mod := report.SiteLabels(s.o.Sources.Symbolizer, p.PID, site.Address)
		byLabel[[2]string{fn, mod}] += site.Bytes
	}
	return s.topOf(byLabel)
}

type siteSeries struct {
	function, module string
	live             uint64
}

// topSites sums the process's heap call sites by (function, module), the
// labels a series has (one function may allocate from several lines), and
// keeps the Top largest by live bytes.
func (s *Server) topSites(p aggregate.ProcessSnapshot) []siteSeries {
	byLabel := map[[2]string]uint64{}
	for _, site := range p.Sites {
		if site.Category != aggregate.Heap || site.LiveBytes == 0 {
			continue
		}
		fn, _, mod := report.SiteLabels(s.o.Sources.Symbolizer, p.PID, site.Address)
		byLabel[[2]string{fn, mod}] += site.LiveBytes
	}
	return s.topOf(byLabel)
}

// topOf orders series by value, largest first, and keeps the Top.
func (s *Server) topOf(byLabel map[[2]string]uint64) []siteSeries {
	out := make([]siteSeries, 0, len(byLabel))
	for k, v := range byLabel {
		out = append(out, siteSeries{k[0], k[1], v})
	}
	slices.SortFunc(out, func(a, b siteSeries) int {
		if r := cmp.Compare(b.live, a.live); r != 0 {
			return r
		}
		return cmp.Compare(a.function+a.module, b.function+b.module)
	})
	if s.o.Top > 0 && len(out) > s.o.Top {
		out = out[:s.o.Top]
	}
	return out
}
