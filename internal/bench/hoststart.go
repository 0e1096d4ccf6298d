package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// hostStartTarget is the goal: memtrace's CPU per short-lived
// process start in whole-host mode.
const hostStartTarget = 1.0 // ms

// hostStartIdle is how long memtrace's idle CPU is measured, to show
// beside what the starts cost.
const hostStartIdle = 2 * time.Second

// hostStart measures memtrace's own CPU per short-lived process start in
// whole-host mode, by default (resident memory) and with --heap (every
// process's allocator probed): all of memtrace's CPU while N runs of
// /bin/true, then of sqlite3, start one after the other, over N. That is
// an upper bound: the host's other processes and the sweep count too (on
// a shared machine, subtracting an idle rate measured apart gave figures
// below zero); the idle rate is in the row's note.
func (r *runner) hostStart(ctx context.Context) ([]*Comparison, error) {
	n := 200
	if r.cfg.Quick {
		n = 20
	}
	c := &Comparison{ID: "hoststart", Title: fmt.Sprintf("whole host: memtrace CPU per process start (%d starts each)", n), Unit: "ms",
		Notes: []string{"all of memtrace's threads' CPU (schedstat) while the programs start one after the other, over the starts: an upper bound (the host's other processes count too)"}}
	sqlite := tool("sqlite3")
	programs := []struct {
		name string
		argv []string
		skip string
	}{
		{"/bin/true", []string{"/bin/true"}, ""},
		{"sqlite3", []string{sqlite, ":memory:", "select 1;"}, notInstalled("sqlite3")},
	}
	modes := []struct {
		name string
		args []string
	}{{"default", nil}, {"--heap", []string{"--heap"}}}
	rows := map[string]*Row{}
	for _, m := range modes {
		for _, p := range programs {
			name := p.name + " (" + m.name + ")"
			switch {
			case r.noBPF != "":
				c.skip(name, r.noBPF)
			case p.skip != "":
				c.skip(name, p.skip)
			default:
				rows[name] = c.add(name)
			}
		}
	}
	for round := range r.cfg.Rounds {
		for _, m := range modes {
			if r.noBPF != "" {
				continue
			}
			r.logf("hoststart: round %d/%d: %s", round+1, r.cfg.Rounds, m.name)
			cmd, stop, err := r.startHostArgs(ctx, m.args...)
			if err != nil {
				for _, p := range programs {
					if row := rows[p.name+" ("+m.name+")"]; row != nil {
						row.record(0, err)
					}
				}
				continue
			}
			pid := cmd.Process.Pid
			settleCPU(pid)
			idle, err := cpuOver(pid, func() error { time.Sleep(hostStartIdle); return nil })
			for _, p := range programs {
				row := rows[p.name+" ("+m.name+")"]
				if row == nil {
					continue
				}
				if err != nil {
					row.record(0, err)
					continue
				}
				start := time.Now()
				used, err := cpuOver(pid, func() error {
					for range n {
						if _, err := run(ctx, time.Minute, p.argv[0], p.argv[1:]...); err != nil {
							return err
						}
					}
					return nil
				})
				took := time.Since(start)
				row.record(float64(used.Microseconds())/1000/float64(n), err)
				idleRate := idle.Seconds() / hostStartIdle.Seconds() // CPU s per s
				net := (used.Seconds() - idleRate*took.Seconds()) * 1000 / float64(n)
				row.Note = fmt.Sprintf("idle: %.1f ms of CPU per s; starts took %.1f s; less idle: %.2f ms per start",
					idleRate*1000, took.Seconds(), net)
			}
			stop()
		}
	}
	for _, row := range rows {
		row.summarize()
		if row.Status == StatusOK {
			row.Target = fmt.Sprintf("<= %.1f ms", hostStartTarget)
			row.Met = ptr(row.Median <= hostStartTarget)
		}
	}
	return []*Comparison{c}, nil
}

// settleCPU waits, 20 s at most, until memtrace is done with its start
// (the tables of every file in use on the host are built in the
// background): a half second in which it uses under a tenth of a CPU.
func settleCPU(pid int) {
	for range 40 {
		used, err := cpuOver(pid, func() error { time.Sleep(500 * time.Millisecond); return nil })
		if err != nil || used < 50*time.Millisecond {
			return
		}
	}
}

// cpuOver is the CPU time process pid's threads spent while f ran.
func cpuOver(pid int, f func() error) (time.Duration, error) {
	before, err := threadsCPU(pid)
	if err != nil {
		return 0, err
	}
	if err := f(); err != nil {
		return 0, err
	}
	after, err := threadsCPU(pid)
	if err != nil {
		return 0, err
	}
	return after - before, nil
}

// threadsCPU sums the time on CPU of pid's threads (/proc/PID/task/*/
// schedstat, nanoseconds: finer than stat's clock ticks).
func threadsCPU(pid int) (time.Duration, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("threads of memtrace (%d): %v", pid, err)
	}
	var total time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that ended meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", t, err)
		}
		total += time.Duration(ns)
	}
	return total, nil
}
