package tracer

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/event"
)

// TestExecProgram: the whole-host exec record carries the program as the
// kernel loaded it (its code's range, the file's device, inode and size,
// the name the exec found it by), so that a process gone before its
// mappings are read still resolves; for a process the filters leave out,
// nothing.
func TestExecProgram(t *testing.T) {
	needBPF(t)
	bin := filepath.Join(t.TempDir(), "exec_program")
	if out, err := exec.Command("gcc", "-O2", "-o", bin, "../../testdata/exec_program.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v: %s", err, out)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	for _, tc := range []struct {
		name   string
		comm   string
		wanted bool
	}{
		{"every process", "", true},
		{"its comm", "exec_program", true},
		{"another comm", "not-this-one", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.RingBytes = 1 << 20
			o.SampleBytes = 512 << 10
			o.Host, o.Comm = true, tc.comm
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
			if !tc.wanted {
				if got.Program != nil || got.Path != "" || got.Size != 0 {
					t.Errorf("exec record of a process left out: path %q, program %+v, wanted %d; want none", got.Path, got.Program, got.Size)
				}
				return
			}
			want := event.Program{Start: start, End: end, Dev: uint64(st.Dev), Ino: st.Ino, Size: uint64(st.Size)}
			// On overlayfs (the kernel matrix's guests, when the repository
			// is under /tmp) and btrfs, stat(2) gives another device than the
			// kernel has for the file: the device is checked where the
			// kernel's key for the file (mt_file_key, as the unwinder sees
			// it) is stat's.
			key, err := objs.tables.keyOfPath(bin)
			if err != nil {
				t.Fatal(err)
			}
			if got.Program != nil && statDev(key.Dev) != want.Dev {
				t.Logf("stat's device %d, the mapping's %d, the exec's %d", want.Dev, statDev(key.Dev), got.Program.Dev)
				want.Dev = got.Program.Dev
			}
			if got.Program == nil || *got.Program != want || got.Path != bin || got.Comm != "exec_program" || got.Size != 1 {
				t.Errorf("exec record: path %q comm %q wanted %d program %+v, want %q, exec_program, 1, %+v",
					got.Path, got.Comm, got.Size, got.Program, bin, want)
			}
		})
	}
}
