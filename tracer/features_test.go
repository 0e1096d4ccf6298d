package tracer

import (
	"errors"
	"testing"

	"github.com/cilium/ebpf/features"
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
