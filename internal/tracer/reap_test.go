package tracer

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/testwait"
)

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

// TestReaperWaits: the reaper holds the links until memtrace has closed
// its own descriptors: had it exited first, memtrace's closes were the
// last, and memtrace waited for the teardown after all.
func TestReaperWaits(t *testing.T) {
	held := []*os.File{}
	f, err := os.Open("/dev/null") // any descriptor stands for a link
	if err != nil {
		t.Fatal(err)
	}
	held = append(held, f)
	closed, pid, err := reap(held)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	// It waits in read(2) on its stdin (system call 0, descriptor 0).
	testwait.For(t, "the reaper reading its stdin", func() bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/syscall")
		return err == nil && strings.HasPrefix(string(b), "0 0x0 ")
	})
	closed.Close()
	reapers.Wait()
}
