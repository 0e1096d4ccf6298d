package tracer

import (
	"os"
	"testing"
)

// TestLoadModes loads the programs in each mode: the verifier sees a
// different program for each (the loader's constants prune dead code).
func TestLoadModes(t *testing.T) {
	needBPF(t)
	cg := "/sys/fs/cgroup/unified"
	if _, err := os.Stat(cg + "/cgroup.procs"); err != nil {
		cg = "/sys/fs/cgroup"
	}
	for _, tc := range []struct {
		name string
		o    func(*Options)
	}{
		{"exact", func(o *Options) {}},
		{"exact stacks", func(o *Options) { o.StackDepth = 16 }},
		{"sampled", func(o *Options) { o.SampleBytes = 512 << 10 }},
		{"host sampled", func(o *Options) { o.SampleBytes = 512 << 10; o.Host = true }},
		{"host comm cgroup", func(o *Options) {
			o.SampleBytes = 65536
			o.Host, o.Comm, o.CgroupPath = true, "a-very-long-command-name", cg
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.RingBytes = 1 << 16
			tc.o(&o)
			objs, err := Load(o)
			if err != nil {
				t.Fatal(err)
			}
			defer objs.Close()
			if o.Host {
				if err := objs.AttachHost(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestKernelBTFOnce: the kernel's BTF is decoded into one cache, which
// the feature probe and the load share, and the load drops it afterwards.
func TestKernelBTFOnce(t *testing.T) {
	needBPF(t)
	probed := kernelBTF()
	if _, err := probed.Kernel(); err != nil {
		t.Fatal(err)
	}
	_ = haveExitGroupDead() // as ProbeKernel, on the same cache
	if got := kernelBTF(); got != probed {
		t.Error("kernelBTF made a new cache while one was held")
	}
	o := DefaultOptions()
	o.RingBytes = 1 << 20
	objs, err := Load(o)
	if err != nil {
		t.Fatal(err)
	}
	defer objs.Close()
	kernelTypesMu.Lock()
	defer kernelTypesMu.Unlock()
	if kernelTypes != nil {
		t.Error("the load kept the kernel's BTF")
	}
}
