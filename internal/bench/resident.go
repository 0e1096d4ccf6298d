package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/memtrace/memtrace/internal/tracer"
)

// The resident section: what the whole host's default (resident memory by
// who made it resident: page-fault sampling, no allocator probe) costs
// the programs it watches, how close its estimates come, and what memtrace
// itself keeps.

const rowHostDefault = "memtrace whole host (default)"

// rowFaultFloor: empty programs on the tracepoints the default attaches
// (attachEmptyFaultPrograms), the floor of its cost.
const rowFaultFloor = "floor: empty fault programs"

// hostSettle: how long the whole host's memtrace runs before a traced
// round starts, so that the round measures it left on, not starting.
const hostSettle = 3 * time.Second

// residentTimeout bounds one run of a resident workload.
const residentTimeout = 5 * time.Minute

func (r *runner) resident(ctx context.Context) ([]*Comparison, error) {
	if r.noBPF != "" {
		return []*Comparison{{ID: "resident", Title: "resident", Notes: []string{"skipped: " + r.noBPF}}}, nil
	}
	faults, err := compileC(ctx, r.root, r.tmp, "faults")
	if err != nil {
		return nil, err
	}
	tracepoints, err := tracer.FaultTracepoints()
	if err != nil {
		return nil, err
	}
	var cs []*Comparison
	// Cost: untraced against the whole host's default running beside; the
	// program's wall time, and its CPU time (user + system: the fault
	// path's BPF work is system time), which a machine shared with other
	// work disturbs less.
	hostCost := func(id, title, skip string, name string, args ...string) []*Comparison {
		var perFault []float64
		perProgram := map[string][]float64{} // the same, program by program
		note := "memtrace (no target, no flag) runs the whole round, attached 3 s before the program starts; the floor attaches a program that returns at once to each tracepoint memtrace's default attaches (" + strings.Join(tracepoints, ", ") + ")"
		wallC := &Comparison{ID: id, Title: title + ": wall time", Unit: "s", Baseline: rowUntraced, Notes: []string{note}}
		cpuC := &Comparison{ID: id + "-cpu", Title: title + ": CPU time (user + system)", Unit: "s", Baseline: rowUntraced, Notes: []string{note}}
		times := func(o output, err error) ([]float64, *traceSummary, error) {
			return []float64{o.wall.Seconds(), o.cpu.Seconds()}, nil, err
		}
		timed := true
		host := func(ctx context.Context) ([]float64, *traceSummary, error) {
			stop, err := r.startHost(ctx)
			if err != nil {
				return nil, nil, err
			}
			t, s, err := times(run(ctx, residentTimeout, name, args...))
			progs := stop()
			if ns := faultNs(progs); ns > 0 && !timed {
				perFault = append(perFault, ns)
				for _, p := range faultPrograms {
					perProgram[p] = append(perProgram[p], float64(progs[p].ns)/float64(progs["mt_fault_user"].runs))
				}
			}
			return t, s, err
		}
		// Timed with the BPF statistics off (statsOff); the BPF time per
		// fault comes from as many runs of their own with them on.
		r.statsOff()
		statsNote := "timed with the kernel's BPF statistics off (on, they add two clock reads to every program run)"
		if statsOn() {
			statsNote = "kernel.bpf_stats_enabled stayed on (set outside the bench): the traced rounds pay two clock reads per program run"
		}
		r.alternate(ctx, []*Comparison{wallC, cpuC}, []workloadVariant{
			{name: rowUntraced, skip: skip, run: func(ctx context.Context) ([]float64, *traceSummary, error) {
				return times(run(ctx, residentTimeout, name, args...))
			}},
			{name: rowFaultFloor, skip: skip, run: func(ctx context.Context) ([]float64, *traceSummary, error) {
				links, err := attachEmptyFaultPrograms(tracepoints)
				if err != nil {
					return nil, nil, err
				}
				defer closeLinks(links)
				return times(run(ctx, residentTimeout, name, args...))
			}},
			{name: rowHostDefault, skip: skip, run: host},
		})
		timed = false
		if err := r.statsOn(); err == nil && skip == "" {
			for i := 0; i < r.cfg.Rounds && ctx.Err() == nil; i++ {
				r.logf("%s: BPF statistics run %d/%d", id, i+1, r.cfg.Rounds)
				host(ctx)
			}
		}
		if len(perFault) > 0 {
			cpuC.Notes = append(cpuC.Notes, fmt.Sprintf("BPF time per user write fault (kernel.bpf_stats_enabled, all fault programs, in runs of their own): %.0f ns, median of %d runs",
				median(perFault), len(perFault)))
			var split []string
			for _, p := range faultPrograms {
				split = append(split, fmt.Sprintf("%s %.0f", p, median(perProgram[p])))
			}
			cpuC.Notes = append(cpuC.Notes, "of which, per program (ns per user write fault, medians): "+strings.Join(split, ", "))
		}
		wallC.Notes = append(wallC.Notes, statsNote)
		return []*Comparison{wallC, cpuC}
	}
	rounds := "8"
	if r.cfg.Quick {
		rounds = "1"
	}
	cs = append(cs, hostCost("resident-faults", "faults.c (map 256 MiB, write a byte a page, unmap; "+rounds+" times)", "",
		faults, rounds)...)
	if rel := firstExisting(r.root, sqliteScripts...); rel != "" {
		read := ".read '" + filepath.Join(r.root, rel) + "'"
		cs = append(cs, hostCost("resident-sqlite", "sqlite3 -batch :memory: \".read "+rel+"\"", notInstalled("sqlite3"),
			tool("sqlite3"), "-batch", "-bail", ":memory:", read)...)
	}
	return cs, nil
}

// residentAccuracySection is the "resident-accuracy" section.
func (r *runner) residentAccuracySection(ctx context.Context) ([]*Comparison, error) {
	if r.noBPF != "" {
		return []*Comparison{{ID: "resident-accuracy", Title: "resident accuracy", Notes: []string{"skipped: " + r.noBPF}}}, nil
	}
	return r.residentAccuracy(ctx)
}

// residentMemorySection is the "resident-memory" section.
func (r *runner) residentMemorySection(ctx context.Context) ([]*Comparison, error) {
	if r.noBPF != "" {
		return []*Comparison{{ID: "resident-memory", Title: "memtrace's own memory", Notes: []string{"skipped: " + r.noBPF}}}, nil
	}
	return []*Comparison{r.residentMemory(ctx)}, nil
}

// startHost starts memtrace with no target and no flag (the default) and
// returns once it has attached; stop ends it as Ctrl-C does.
func (r *runner) startHost(ctx context.Context) (stop func() map[string]progRun, err error) {
	_, stop, err = r.startHostArgs(ctx)
	return stop, err
}

// startHostArgs is startHost with memtrace's flags args added; it gives
// memtrace's process too.
func (r *runner) startHostArgs(ctx context.Context, args ...string) (cmd *exec.Cmd, stop func() map[string]progRun, err error) {
	cmd = command(ctx, r.memtrace, append([]string{"-v", "-o", os.DevNull}, args...)...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start memtrace: %w", err)
	}
	settle := hostSettle
	if r.cfg.Quick {
		settle = 0
	}
	var rest bytes.Buffer
	copied := make(chan struct{})
	stop = func() map[string]progRun {
		cmd.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			killGroup(cmd)
			<-done
		}
		select {
		case <-copied: // the -v lines memtrace wrote at its end
		case <-time.After(time.Second):
			return nil
		}
		return parseBPFPrograms(rest.String())
	}
	sc := bufio.NewScanner(pipe)
	var log strings.Builder
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "msg=attached") {
			go func() { io.Copy(&rest, pipe); close(copied) }()
			// Left on, memtrace is past its start: the tables of the
			// allocator files in use are built, the processes seen.
			time.Sleep(settle)
			return cmd, stop, nil
		}
	}
	close(copied)
	stop()
	return nil, nil, fmt.Errorf("memtrace ended before attaching%s", tail(log.String()))
}

// faultPrograms are the programs of resident attribution (bpf/resident.h).
var faultPrograms = []string{"mt_fault_user", "mt_fault_kern", "mt_page_alloc", "mt_rss_stat"}

// faultNs is the fault programs' BPF time per user write fault (0 when the
// kernel did not time them).
func faultNs(progs map[string]progRun) float64 {
	var ns uint64
	for _, name := range faultPrograms {
		ns += progs[name].ns
	}
	if progs["mt_fault_user"].runs == 0 {
		return 0
	}
	return float64(ns) / float64(progs["mt_fault_user"].runs)
}

// residentRecord is what the accuracy runs read of a resident record.
type residentRecord struct {
	Type          string `json:"type"`
	Function      string `json:"function"`
	ResidentBytes uint64 `json:"resident_bytes"`
	Stderr        uint64 `json:"resident_bytes_stderr"`
	Final         bool   `json:"final"`
}

// residentAccuracy runs the accuracy fixtures under `memtrace -- ` with the
// default sampling and gives each function's estimate over what it holds.
func (r *runner) residentAccuracy(ctx context.Context) ([]*Comparison, error) {
	cBin, err := compileFixture(ctx, r.root, r.tmp, "resident.c")
	if err != nil {
		return nil, err
	}
	goBin := filepath.Join(r.tmp, "resident_go")
	b := exec.CommandContext(ctx, "go", "build", "-o", goBin, ".")
	b.Dir = filepath.Join(r.root, "testdata", "resident_go")
	b.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := b.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build resident_go: %w\n%s", err, out)
	}
	type fixture struct {
		bin   string
		truth map[string]float64
		order []string
	}
	fixtures := []fixture{
		{cBin, map[string]float64{"hold_malloc": 64 << 20, "hold_mmap": 32 << 20, "hold_calloc": 16 << 20}, []string{"hold_malloc", "hold_mmap", "hold_calloc"}},
		{goBin, map[string]float64{"main.keepSlices": 192 << 20}, []string{"main.keepSlices"}},
	}
	var all []*Comparison
	for _, f := range fixtures {
		var cs []*Comparison
		for _, fn := range f.order {
			cs = append(cs, &Comparison{ID: "resident-accuracy-" + fn,
				Title: fmt.Sprintf("resident bytes charged to %s (holds %.0f MiB) over what it holds", fn, f.truth[fn]/(1<<20)), Unit: "x",
				Notes: []string{"memtrace --json -- " + filepath.Base(f.bin) + " at the default --resident-bytes (64K); the target is within 15% (0.85x..1.15x)"}})
		}
		r.alternate(ctx, cs, []workloadVariant{{name: "memtrace -- (default)", run: func(ctx context.Context) ([]float64, *traceSummary, error) {
			o, err := run(ctx, residentTimeout, r.memtrace, "--json", "--", f.bin)
			if err != nil {
				return nil, nil, err
			}
			got := map[string]float64{}
			sc := bufio.NewScanner(strings.NewReader(o.stdout))
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				var rec residentRecord
				if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Type == "resident" && rec.Final {
					got[rec.Function] += float64(rec.ResidentBytes)
				}
			}
			var vals []float64
			for _, fn := range f.order {
				vals = append(vals, got[fn]/f.truth[fn])
			}
			return vals, nil, nil
		}}})
		all = append(all, cs...)
	}
	return all, nil
}

// compileFixture builds testdata/NAME (a C file) into dir.
func compileFixture(ctx context.Context, root, dir, name string) (string, error) {
	out := filepath.Join(dir, strings.TrimSuffix(name, ".c"))
	if b, err := exec.CommandContext(ctx, "gcc", "-O2", "-g", "-o", out, filepath.Join(root, "testdata", name)).CombinedOutput(); err != nil {
		return "", fmt.Errorf("gcc %s: %w\n%s", name, err, b)
	}
	return out, nil
}

// residentMemory measures memtrace's own peak resident memory (VmHWM):
// the whole host's default idle, with 1000 processes each making 3 MiB
// resident, and -p of one process making 8 GiB resident (a 64 GB process
// keeps 8x its sampled pages: see docs/performance.md).
func (r *runner) residentMemory(ctx context.Context) *Comparison {
	c := &Comparison{ID: "resident-memory", Title: "memtrace's own peak resident memory (VmHWM)", Unit: "MiB", Baseline: "whole host, idle",
		Notes: []string{"each round starts memtrace afresh; its VmHWM is read just before it is stopped"}}
	bin, err := compileFixture(ctx, r.root, r.tmp, "resident.c")
	if err != nil {
		c.Notes = append(c.Notes, "failed: "+err.Error())
		return c
	}
	many, big := 1000, 8<<10 // processes; MiB
	if r.cfg.Quick {
		many, big = 50, 256
	}
	hwm := func(pid int) float64 {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		for l := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				return kb / 1024
			}
		}
		return math.NaN()
	}
	withMemtrace := func(ctx context.Context, args []string, work func() error) ([]float64, *traceSummary, error) {
		cmd := command(ctx, r.memtrace, append([]string{"-v", "-o", os.DevNull}, args...)...)
		pipe, _ := cmd.StderrPipe()
		if err := cmd.Start(); err != nil {
			return nil, nil, err
		}
		defer func() { cmd.Process.Signal(syscall.SIGINT); cmd.Wait() }()
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "msg=attached") {
				break
			}
		}
		go io.Copy(io.Discard, pipe)
		if err := work(); err != nil {
			return nil, nil, err
		}
		time.Sleep(2 * time.Second) // a pagemap check or two
		return []float64{hwm(cmd.Process.Pid)}, nil, nil
	}
	r.alternate(ctx, []*Comparison{c}, []workloadVariant{
		{name: "whole host, idle", run: func(ctx context.Context) ([]float64, *traceSummary, error) {
			return withMemtrace(ctx, nil, func() error { return nil })
		}},
		{name: fmt.Sprintf("whole host, %d processes of 3 MiB", many), run: func(ctx context.Context) ([]float64, *traceSummary, error) {
			return withMemtrace(ctx, nil, func() error {
				var wg sync.WaitGroup
				errs := make(chan error, many)
				for i := 0; i < many; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						// No pipes: a thousand readers would lag on 2 busy cores.
						p := exec.CommandContext(ctx, bin, "1", "1", "1")
						p.Env = append(os.Environ(), "HOLD_MS=3000")
						errs <- p.Run()
					}()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					if err != nil {
						return err
					}
				}
				return nil
			})
		}},
		{name: fmt.Sprintf("-p of a process making %d MiB resident", big), run: func(ctx context.Context) ([]float64, *traceSummary, error) {
			target := command(ctx, bin, strconv.Itoa(big), "0", "0")
			target.Env = append(os.Environ(), "WAIT=1")
			stdin, _ := target.StdinPipe()
			stdout, _ := target.StdoutPipe()
			if err := target.Start(); err != nil {
				return nil, nil, err
			}
			defer killGroup(target)
			return withMemtrace(ctx, []string{"-p", strconv.Itoa(target.Process.Pid)}, func() error {
				io.WriteString(stdin, "go\n")
				l, err := bufio.NewReader(stdout).ReadString('\n')
				if err != nil || strings.TrimSpace(l) != "ready" {
					return fmt.Errorf("resident fixture: %q %v", l, err)
				}
				return nil
			})
		}},
	})
	return c
}
