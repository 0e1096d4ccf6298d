package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"
)

// runner holds what the sections share: built binaries, a scratch directory
// and the progress log.
type runner struct {
	cfg        Config
	root       string
	tmp        string
	memtrace   string // "" when memtrace cannot run here
	mallocfree string
	// noBPF says why probes cannot be attached here ("" when they can).
	noBPF    string
	progress io.Writer
	// empty is the empty BPF program of the floor rows, loaded once.
	empty *emptyProbe
	// testBins records the packages whose test binaries are built in tmp.
	testBins map[string]bool
	// stats holds kernel.bpf_stats_enabled on (nil while off): the
	// sections time with it on, but for the resident section's cost rounds
	// (see statsOff).
	stats io.Closer
}

// statsOn turns the kernel's BPF run-time statistics on, if off.
func (r *runner) statsOn() error {
	if r.stats != nil || r.noBPF != "" {
		return nil
	}
	c, err := enableBPFStats()
	if err != nil {
		return err
	}
	r.stats = c
	return nil
}

// statsOff turns them off, if this bench turned them on. Timing every BPF
// program run costs each run two clock reads: a comparison between an
// untraced program and one whose every page fault runs memtrace's
// programs would count that against memtrace.
func (r *runner) statsOff() {
	if r.stats != nil {
		r.stats.Close()
		r.stats = nil
	}
}

// Run measures every configured section and returns the results; progress
// lines go to progress. A section that cannot run (tools missing, no root)
// is reported as skipped with the reason; Run fails only when nothing can be
// set up or ctx ends.
func Run(ctx context.Context, cfg Config, progress io.Writer) (*Results, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "membench-")
	if err != nil {
		return nil, fmt.Errorf("make scratch directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	r := &runner{cfg: cfg, root: root, tmp: tmp, noBPF: bpfUnavailable(), progress: progress}
	defer func() {
		if r.empty != nil {
			r.empty.Close()
		}
	}()
	res := &Results{Started: time.Now(), Host: hostInfo(), Config: cfg}
	if err := r.statsOn(); err != nil {
		return nil, err
	}
	defer r.statsOff()

	if tool("gcc") == "" {
		return nil, fmt.Errorf("gcc is needed to build testdata/bench/mallocfree.c")
	}
	r.logf("building mallocfree and memtrace")
	if r.mallocfree, err = compileC(ctx, root, tmp, "mallocfree", "-pthread", "-lstdc++"); err != nil {
		return nil, err
	}
	switch {
	case r.noBPF != "":
	case cfg.Memtrace != "":
		r.memtrace = cfg.Memtrace
	default:
		if r.memtrace, err = buildMemtrace(ctx, root, tmp); err != nil {
			return nil, err
		}
	}

	sections := map[string]func(context.Context) ([]*Comparison, error){
		"micro":     r.micro,
		"startup":   r.startup,
		"node":      r.node, // node.go
		"consumer":  r.consumer,
		"livemem":   r.liveMemory,
		"footprint": r.footprint,
		"sqlite":    r.sqlite,
		"blocks":    r.blocks,
		"heapscale": r.heapscale, // heapscale.go
		"redis":     r.redis,
		"python":    r.python,
		// resident.go
		"resident":          r.resident,
		"resident-accuracy": r.residentAccuracySection,
		"resident-memory":   r.residentMemorySection,
		"hoststart":         r.hostStart, // hoststart.go
		"access":            r.access,    // access.go
	}
	for _, name := range Sections {
		if !cfg.has(name) {
			continue
		}
		cs, err := sections[name](ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("interrupted during %s: %w", name, ctx.Err())
		}
		if err != nil {
			cs = append(cs, &Comparison{ID: name, Title: name, Notes: []string{"failed: " + err.Error()}})
		}
		res.Comparisons = append(res.Comparisons, cs...)
	}
	noteConsumerHeadroom(res)
	res.Host.LoadEnd = loadAvg()
	res.Seconds = time.Since(res.Started).Seconds()
	return res, nil
}

func (r *runner) logf(format string, args ...any) {
	if r.progress != nil {
		fmt.Fprintf(r.progress, "membench: "+format+"\n", args...)
	}
}
