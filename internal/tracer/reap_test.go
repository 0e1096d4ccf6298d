package tracer

import "testing"

// TestReleaseHoldsEveryLink: Release hands the reaper every link, a
// uprobe_multi link (its link alone) as well as a per-probe one (its link
// and its perf event), so that memtrace never waits for the kernel to tear
// them down.
func TestReleaseHoldsEveryLink(t *testing.T) {
	needBPF(t)
	pid, placed := libcTarget(t)
	k, err := probeKernel(lacking(""))
	if err != nil {
		t.Fatal(err)
	}
	paths := []struct {
		attach  AttachPath
		perLink int // files held per link
	}{{AttachPerProbe, 2}}
	if k.Attach == AttachMulti {
		paths = append(paths, struct {
			attach  AttachPath
			perLink int
		}{AttachMulti, 1})
	}
	for _, p := range paths {
		t.Run(string(p.attach), func(t *testing.T) {
			k.Attach = p.attach
			o := DefaultOptions()
			o.RingBytes = 1 << 20
			objs, err := load(o, k)
			if err != nil {
				t.Fatal(err)
			}
			defer objs.Close()
			a := &Attachment{PID: pid}
			if err := objs.Attach(a, placed); err != nil {
				t.Fatal(err)
			}
			links := len(a.entries) + len(a.returns)
			held, err := holdLinks(a.entries, a.returns)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range held {
				f.Close()
			}
			if links == 0 || len(held) != links*p.perLink {
				t.Errorf("%d files held for %d links, want %d", len(held), links, links*p.perLink)
			}
			if err := a.Release(); err != nil {
				t.Fatal(err)
			}
			if len(a.entries)+len(a.returns) != 0 {
				t.Errorf("%d links left after Release", len(a.entries)+len(a.returns))
			}
			reapers.Wait()
		})
	}
}
