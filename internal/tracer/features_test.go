package tracer

import (
	"errors"
	"os/exec"
	"testing"

	"github.com/cilium/ebpf/features"

	"github.com/memtrace/memtrace/internal/allocator"
	"github.com/memtrace/memtrace/internal/testwait"
)

// TestFeatures probes the running kernel with features hidden, as on an
// older kernel: the fallbacks it picks and the refusal's exact line.
func TestFeatures(t *testing.T) {
	needBPF(t)
	multi := AttachPerProbe
	if features.HaveBPFLinkUprobeMulti() == nil {
		multi = AttachMulti
	}
	rel := release()
	for _, tc := range []struct {
		lacks  string
		attach AttachPath
		err    string
	}{
		{"", multi, ""},
		{"uprobe_multi", AttachPerProbe, ""},
		{"uprobe_multi,exit_group_dead", AttachPerProbe, ""},
		{"attach_cookie", "", "unsupported kernel: " + rel + " lacks bpf_get_attach_cookie (Linux 5.15); memtrace needs Linux 5.17 or later"},
		{"task_storage,uprobe_multi", "", "unsupported kernel: " + rel + " lacks task storage in tracing programs (Linux 5.13); memtrace needs Linux 5.17 or later"},
		{"all", "", "unsupported kernel: " + rel + " lacks BTF (Linux 5.4); memtrace needs Linux 5.17 or later"},
	} {
		t.Run(tc.lacks, func(t *testing.T) {
			k, err := probeKernel(lacking(tc.lacks))
			if tc.err != "" {
				if err == nil || err.Error() != tc.err || !errors.Is(err, ErrOldKernel) {
					t.Fatalf("err = %v, want %q (ErrOldKernel)", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if k.Attach != tc.attach || k.Release != rel {
				t.Errorf("attach %q on %q, want %q on %q", k.Attach, k.Release, tc.attach, rel)
			}
			// Sampled mode takes sessions where uprobe_multi and sessions are.
			sampled := tc.attach
			if tc.attach == AttachMulti && haveUprobeSession() == nil {
				sampled = AttachSession
			}
			if got := k.AttachFor(1 << 19); got != sampled || k.AttachFor(0) != tc.attach {
				t.Errorf("sampled: attach %q, exact %q; want %q and %q", got, k.AttachFor(0), sampled, tc.attach)
			}
		})
	}
}

// TestLoadPerProbe loads the programs for classic links, with and without
// group_dead: what older kernels get.
func TestLoadPerProbe(t *testing.T) {
	needBPF(t)
	for _, lacks := range []string{"uprobe_multi", "uprobe_multi,exit_group_dead"} {
		k, err := probeKernel(lacking(lacks))
		if err != nil {
			t.Fatal(err)
		}
		o := DefaultOptions()
		o.RingBytes, o.Host = 1<<16, true
		objs, err := load(o, k)
		if err != nil {
			t.Fatalf("%s: %v", lacks, err)
		}
		err = objs.AttachHost()
		objs.Close()
		if err != nil {
			t.Fatalf("%s: %v", lacks, err)
		}
	}
}

// TestDetachStale: after an exec, probes the new program still needs stay
// in place and only the others go; a file's uprobe_multi links go whole.
func TestDetachStale(t *testing.T) {
	needBPF(t)
	pid, placed := libcTarget(t)
	keep := placed[:len(placed)-1]
	for _, tc := range []struct {
		lacks       string
		kept, links int // after DetachStale(keep)
	}{
		{"uprobe_multi", len(keep), len(keep) + countReturns(keep)},
		{"", 0, 0}, // libc's two links held the dropped function too
	} {
		k, err := probeKernel(lacking(tc.lacks))
		if err != nil {
			t.Fatal(err)
		}
		if tc.lacks == "" && k.Attach != AttachMulti {
			continue
		}
		o := DefaultOptions()
		o.RingBytes = 1 << 16
		objs, err := load(o, k)
		if err != nil {
			t.Fatal(err)
		}
		a := &Attachment{PID: pid}
		if err := objs.Attach(a, placed); err != nil {
			t.Fatal(err)
		}
		err = a.DetachStale(keep)
		kept, links := a.Probes(), len(a.entries)+len(a.returns)
		if err == nil {
			err = objs.Attach(a, keep)
		}
		after := a.Probes()
		a.Detach()
		objs.Close()
		if err != nil {
			t.Fatal(err)
		}
		if kept != tc.kept || links != tc.links || after != len(keep) {
			t.Errorf("%s: %d probes in %d links kept, %d after Attach; want %d in %d, %d",
				k.Attach, kept, links, after, tc.kept, tc.links, len(keep))
		}
	}
}

func countReturns(ps []Placement) int {
	n := 0
	for _, p := range ps {
		if needsReturn(p) {
			n++
		}
	}
	return n
}

// libcTarget starts a process for the test's lifetime and returns its pid
// and the placements of its allocator (libc) and of the wrappers named.
func libcTarget(tb testing.TB) (int, []Placement) {
	target := exec.Command("sleep", "1000")
	if err := target.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { target.Process.Kill(); target.Wait() })
	testwait.Mapped(tb, target.Process.Pid, "/libc.so")
	testwait.Asleep(tb, target.Process.Pid)
	mods, err := allocator.ForProcess(target.Process.Pid)
	if err != nil {
		tb.Fatal(err)
	}
	probes, err := allocator.Bind(mods)
	if err != nil {
		tb.Fatal(err)
	}
	return target.Process.Pid, Place(probes)
}
