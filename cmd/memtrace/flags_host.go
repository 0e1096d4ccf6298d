package main

import (
	"fmt"
	"os/exec"

	"github.com/spf13/pflag"

	"github.com/memtrace/memtrace/internal/host"
	"github.com/memtrace/memtrace/internal/python"
	"github.com/memtrace/memtrace/internal/session"
	"github.com/memtrace/memtrace/internal/tracer"
)

// defaultHostSample is the whole-host mode's sampling mean: tracing every
// allocation of every process costs too much.
const defaultHostSample = 512 << 10

// sampledRingBytes is the ring buffer's default size when sampling (and in
// the whole host's resident-only default, whose sampled faults are fewer
// still): one
// event per sample_bytes allocated is a few thousand events per second at
// the benchmark's heaviest load even at 64 KiB (the exact mode's 64 MiB
// would sit idle, and its pages count in memtrace's resident memory).
const sampledRingBytes = 4 << 20

// targetRingBytes is the ring buffer's default size with -p and --, every
// allocation traced: a quarter of a second of the heaviest load (~2
// million events a second, some 40 bytes each) while the reader is away.
// The ring's pages are all resident in memtrace, twice over (the reader
// maps them twice, to read across the wrap): 64 MiB made `memtrace --
// /bin/true` a 170 MB process. The whole host keeps 64 MiB: many
// processes write to it at once, and so do --detail (each event carries
// its stack, and a Python process's frames, two words each: 16 MiB lost a
// fifth of a Python script's events), a slower reader (slowReader) and a
// Python target (pythonTarget).
const targetRingBytes = 16 << 20

// slowReader reports whether the run's reader does more per event than
// keep the tables: a recording writes each event, the exports fold each
// into their own tables. A Python script (pymalloc's calls, a million
// events a second) lost a tenth of its events with them at 16 MiB, none
// at 64 MiB.
func slowReader(c *session.Config) bool {
	return c.Record != "" || c.PprofFile != "" || c.FoldedFile != "" || c.HTMLFile != "" || c.Listen != ""
}

// pythonTarget reports whether the command, or a -p target, runs
// CPython: its pymalloc calls are a million events a second, and a
// 16 MiB ring lost a tenth of a script's events on a loaded machine.
func pythonTarget(c *session.Config) bool {
	if len(c.Command) > 0 {
		path, err := exec.LookPath(c.Command[0])
		return err == nil && python.Command(path)
	}
	for _, pid := range c.PIDs {
		if python.Mapped(pid) {
			return true
		}
	}
	return false
}

// addHostFlags registers --sample-bytes, --comm and --cgroup on fs, and
// returns the check to run once the target (or its absence) is known.
func addHostFlags(fs *pflag.FlagSet, c *session.Config) func() error {
	h := &c.HostConfig
	fs.Var(byteSize{&h.SampleBytes, &h.SampleSet, tracer.MaxSampleBytes}, "sample-bytes",
		"sample one allocation per `N` bytes on average and estimate (0 = trace every call; default 512K with --heap, 0 with -p and --); implies --heap")
	fs.BoolVar(&h.Heap, "heap", false,
		"with no target: also trace every process's allocator (a probe on malloc and free, a trap per call; without it, resident memory only)")
	h.ResidentBytes = tracer.DefaultResidentBytes
	var residentSet bool
	fs.Var(byteSize{&h.ResidentBytes, &residentSet, tracer.MaxSampleBytes}, "resident-bytes",
		"resident memory by who made it resident: sample one fault per `N` bytes made resident on average, a huge page weighing 2 MiB (0 = off)")
	fs.StringVar(&h.Comm, "comm", "", "with no target: only processes with command name `NAME`")
	fs.StringVar(&h.Cgroup, "cgroup", "", "with no target: only processes in the cgroup v2 `PATH` (a directory, or a path as /proc/PID/cgroup shows it) or below it")
	return func() error {
		if h.SampleSet {
			h.Heap = true
		}
		if !c.Host() {
			h.Heap = true // -p and --: exact heap tracing beside resident attribution
		}
		if !h.SampleSet && c.Host() {
			h.SampleBytes = defaultHostSample
		}
		if !h.Heap && h.ResidentBytes == 0 {
			return fmt.Errorf("%w: with no target, --resident-bytes 0 leaves nothing to trace: add --heap", errUsage)
		}
		if !h.Heap {
			h.SampleBytes = 0 // no allocator is traced
		}
		// Sampled allocations, or sampled faults alone: few events.
		switch {
		case fs.Changed("ring-size"):
		case h.SampleBytes > 0 || !h.Heap:
			c.RingBytes = sampledRingBytes
		case !c.Host() && !c.Detail && !slowReader(c) && !pythonTarget(c):
			c.RingBytes = targetRingBytes
		}
		if !c.Host() && (h.Comm != "" || h.Cgroup != "") {
			return fmt.Errorf("%w: --comm and --cgroup narrow the whole-host mode (no -p, no command)", errUsage)
		}
		if h.Comm != "" {
			h.Comm = host.CommName(h.Comm)
		}
		if h.Cgroup != "" {
			dir, path, err := host.ResolveCgroup(h.Cgroup)
			if err != nil {
				return fmt.Errorf("%w: --cgroup: %w", errUsage, err)
			}
			h.CgroupDir, h.CgroupPath = dir, path
		}
		return nil
	}
}
