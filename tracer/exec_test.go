package tracer

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/memtrace/memtrace/event"
)

// TestExecProgram: the whole-host exec record carries the program as the
// kernel loaded it (its code's range, the file's device and inode, the
// name the exec found it by), so that a process gone before its mappings
// are read still resolves.
func TestExecProgram(t *testing.T) {
	needBPF(t)
	bin := filepath.Join(t.TempDir(), "exec_program")
	if out, err := exec.Command("gcc", "-O2", "-o", bin, "../testdata/exec_program.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v: %s", err, out)
	}
	o := DefaultOptions()
	o.RingBytes = 1 << 20
	o.SampleBytes = 512 << 10
	o.Host = true
	objs, d := loadDrainer(t, o)
	if err := objs.AttachHost(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var start, end uint64
	if _, err := fmt.Sscanf(string(out), "%x %x", &start, &end); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	want := event.Program{Start: start, End: end, Dev: uint64(st.Dev), Ino: st.Ino, Size: uint64(st.Size)}
	// On overlayfs (the kernel matrix's guests, when the repository is
	// under /tmp) and btrfs, stat(2) gives another device than the kernel
	// has for the file: the device is checked where the kernel's key for
	// the file (file_key_of, as the unwinder sees it) is stat's.
	key, err := objs.tables.keyOfPath(bin)
	if err != nil {
		t.Fatal(err)
	}
	layered := statDev(key.Dev) != want.Dev

	var got *event.Event
	for deadline := time.Now().Add(10 * time.Second); got == nil && time.Now().Before(deadline); {
		if _, err := d.Poll(100*time.Millisecond, func(e *event.Event) {
			if e.Kind == event.Exec && int(e.PID) == cmd.Process.Pid {
				c := *e
				got = &c
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	if got == nil {
		t.Fatal("no exec record of the program")
	}
	if got.Program != nil && layered {
		t.Logf("stat's device %d, the mapping's %d, the exec's %d", want.Dev, statDev(key.Dev), got.Program.Dev)
		want.Dev = got.Program.Dev
	}
	if got.Program == nil || *got.Program != want || got.Path != bin || got.Comm != "exec_program" {
		t.Errorf("exec record: path %q comm %q program %+v, want %q, exec_program, %+v", got.Path, got.Comm, got.Program, bin, want)
	}
}
