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

const pythonTimeout = 5 * time.Minute

// pythonIters is how many iterations testdata/bench/pydepth.py runs at its
// stack's top (each: a PyMem_Malloc and a PyMem_Free, and the list's own).
const pythonIters = 20000

// python times testdata/bench/pydepth.py's loop (ns per iteration, start-up
// left out), at a Python stack of 2 and of 50 frames, untraced and under
// memtrace exact and sampled, with Python frames and without
// (--no-python-frames): what reading Python frames costs per event and
// per frame. The interpreter is Debian's python3.11 (pymalloc's fast
// path inlined: its allocations there reach no probe) or, when present,
// pyenv's 3.11, whose every pymalloc call is probed.
func (r *runner) python(ctx context.Context) ([]*Comparison, error) {
	py := pythonForBench()
	if py == "" {
		return nil, fmt.Errorf("no python3.11 found")
	}
	script := filepath.Join(r.root, "testdata", "bench", "pydepth.py")
	c := &Comparison{ID: "python", Title: "pydepth.py on " + py + ": ns per loop iteration (one list made and dropped)",
		Unit: "ns/iteration", Baseline: rowUntraced + " 50 frames",
		Notes: []string{"each iteration makes two allocations and two frees through pymalloc; only allocations read Python frames",
			"per frame: (memtrace 50 frames - memtrace 2 frames - (untraced 50 - untraced 2)) / 48 / allocations per iteration",
			"user reads per Python frame: 1 (bpf/python.h, py_step: the frame's first 128 bytes); its code object's tag (16 bytes of it) is read the first time the code object is met, and kept until code_dealloc frees it"}}
	loop := func(o output, err error) ([]float64, error) {
		if err != nil {
			return nil, err
		}
		f := strings.Fields(o.stdout)
		if len(f) == 0 {
			return nil, fmt.Errorf("pydepth.py printed nothing")
		}
		v, err := strconv.ParseFloat(f[0], 64)
		return []float64{v}, err
	}
	var vs []workloadVariant
	for _, depth := range []int{2, 50} {
		env := []string{"DEPTH=" + strconv.Itoa(depth), "ITERS=" + strconv.Itoa(pythonIters)}
		vs = append(vs, workloadVariant{name: fmt.Sprintf("%s %d frames", rowUntraced, depth), run: func(ctx context.Context) ([]float64, *traceSummary, error) {
			v, err := loop(runEnv(ctx, pythonTimeout, env, py, script))
			return v, nil, err
		}})
		for _, mode := range []struct{ name, flags string }{{"memtrace", ""}, {"memtrace sampled", "--sample-bytes=512K"},
			{"memtrace native only", "--no-python-frames"}, {"memtrace sampled native only", "--sample-bytes=512K --no-python-frames"}} {
			args := []string{"--json", "-o", os.DevNull}
			args = append(args, strings.Fields(mode.flags)...)
			args = append(args, "--", py, script)
			vs = append(vs, workloadVariant{name: fmt.Sprintf("%s %d frames", mode.name, depth), skip: r.noBPF,
				run: func(ctx context.Context) ([]float64, *traceSummary, error) {
					// memtrace's stdout is the -o file; the script's is its own.
					o, err := runEnv(ctx, pythonTimeout, env, r.memtrace, args...)
					v, err := loop(o, err)
					return v, nil, err
				}})
		}
	}
	r.alternate(ctx, []*Comparison{c}, vs)
	return []*Comparison{c}, nil
}

// pythonForBench is pyenv's 3.11 when present, else Debian's.
func pythonForBench() string {
	home, _ := os.UserHomeDir()
	if m, _ := filepath.Glob(filepath.Join(home, ".pyenv", "versions", "3.11.*", "bin", "python3.11")); len(m) > 0 {
		return m[0]
	}
	if exists("/usr/bin/python3.11") {
		return "/usr/bin/python3.11"
	}
	return ""
}
