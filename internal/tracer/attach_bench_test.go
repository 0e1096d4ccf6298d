package tracer

import (
	"testing"
	"time"
)

// BenchmarkAttach attaches libc's full probe set (allocator functions and
// the default wrappers) to a process and removes it, per attach path:
// attach-ms and detach-ms are the times per run. The per-probe path is
// measured with links created one at a time and attachWorkers at once.
//
//	go test -run X -bench Attach -benchtime 5x ./tracer
func BenchmarkAttach(b *testing.B) {
	needBPF(b)
	pid, placed := libcTarget(b)
	k, err := probeKernel(lacking(""))
	if err != nil {
		b.Fatal(err)
	}
	paths := []struct {
		name    string
		attach  AttachPath
		workers int
	}{
		{"per-probe serial", AttachPerProbe, 1},
		{"per-probe parallel", AttachPerProbe, attachWorkers},
	}
	if k.Attach == AttachMulti {
		paths = append(paths, struct {
			name    string
			attach  AttachPath
			workers int
		}{"multi", AttachMulti, 1})
	}
	for _, p := range paths {
		b.Run(p.name, func(b *testing.B) {
			k.Attach = p.attach
			defer func(w int) { attachWorkers = w }(attachWorkers)
			attachWorkers = p.workers
			o := DefaultOptions()
			o.RingBytes = 1 << 20
			objs, err := load(o, k)
			if err != nil {
				b.Fatal(err)
			}
			defer objs.Close()
			var attach, detach time.Duration
			for b.Loop() {
				a := &Attachment{PID: pid}
				start := time.Now()
				if err := objs.Attach(a, placed); err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				if err := a.Release(); err != nil {
					b.Fatal(err)
				}
				attach += mid.Sub(start)
				detach += time.Since(mid)
				// The reaper's teardown would slow the next attach.
				reapers.Wait()
			}
			b.ReportMetric(float64(attach.Microseconds())/1000/float64(b.N), "attach-ms")
			b.ReportMetric(float64(detach.Microseconds())/1000/float64(b.N), "detach-ms")
			b.ReportMetric(float64(len(placed)), "functions")
		})
	}
}
