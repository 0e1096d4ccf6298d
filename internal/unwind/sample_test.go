package unwind

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/testwait"
)

// TestWalkSampledSqlite stops Debian's sqlite3 (no frame pointers) at
// random instructions while it runs a query, and walks each stack with the
// tables: every walk must reach _start (the entry point). This asks more than the
// allocation probes need (they stop at function entries and walk return
// addresses); an interrupted PC can be in any prologue, epilogue or PLT
// stub.
func TestWalkSampledSqlite(t *testing.T) {
	needTool(t, "sqlite3")
	const query = `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 20000000)
SELECT count(*), sum(length(printf('%d-%s', x, hex(randomblob(8))))) FROM c;
`
	cmd := exec.Command("sqlite3", ":memory:")
	cmd.Stdin = strings.NewReader(query)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	pid := cmd.Process.Pid

	// ptrace requests must come from the thread that attached.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil {
		t.Fatal(err)
	}
	entry := openELF(t, exe).Entry
	cache := NewCache(nil)
	modules := map[string]*module{}
	complete, skipped := 0, 0
	waitCPU(t, pid, 5) // past the dynamic loader, into the query
	for i := 0; i < 60; i++ {
		time.Sleep(7 * time.Millisecond)
		s, err := sample(pid)
		if errors.Is(err, syscall.EPERM) && os.Getenv("CI") != "true" {
			t.Skipf("ptrace: %v", err)
		}
		if err != nil {
			t.Fatalf("sample %d: %v", i, err)
		}
		w := &walker{t: t, s: s, cache: cache, modules: modules}
		frames, ok := w.walk()
		last := frames[len(frames)-1]
		switch {
		case ok && last.module == exe && last.rowPC == entry:
			// sqlite3 is stripped: _start is known by the entry point.
			complete++
		case !ok && last.module == "":
			// A PC outside every file mapping: the vDSO, or a uretprobe
			// trampoline of another tracer on this host.
			skipped++
		default:
			t.Errorf("sample %d: walk stopped: %v", i, frames)
		}
	}
	t.Logf("%d complete stacks, %d skipped (PC outside file mappings)", complete, skipped)
	if complete < 50 {
		t.Errorf("only %d complete stacks", complete)
	}
}

// sample stops pid, reads its registers, stack and mappings, and lets it go.
func sample(pid int) (*snapshot, error) {
	if err := syscall.PtraceAttach(pid); err != nil {
		return nil, err
	}
	defer syscall.PtraceDetach(pid)
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, syscall.WALL, nil); err != nil {
		return nil, err
	}
	var regs syscall.PtraceRegs
	if err := syscall.PtraceGetRegs(pid, &regs); err != nil {
		return nil, err
	}
	maps, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return nil, err
	}
	// From 128 bytes below rsp (the red zone): in an epilogue, between
	// "pop %rbp" and "ret", the CFI still says where rbp was saved, now
	// below rsp; the BPF walker reads it there too.
	const redZone = 128
	s := &snapshot{pc: regs.Rip, rsp: regs.Rsp, rbp: regs.Rbp, base: regs.Rsp - redZone, maps: parseMaps(bytes.NewReader(maps))}
	var end uint64
	for _, line := range strings.Split(string(maps), "\n") {
		if strings.HasSuffix(line, "[stack]") {
			_, hi, _ := strings.Cut(strings.Fields(line)[0], "-")
			end, _ = strconv.ParseUint(hi, 16, 64)
		}
	}
	if end <= regs.Rsp {
		return nil, os.ErrNotExist
	}
	mem, err := os.Open("/proc/" + strconv.Itoa(pid) + "/mem")
	if err != nil {
		return nil, err
	}
	defer mem.Close()
	s.stack = make([]byte, end-s.base)
	if _, err := mem.ReadAt(s.stack, int64(s.base)); err != nil {
		return nil, err
	}
	return s, nil
}

// waitCPU waits until pid has used ticks clock ticks of CPU time.
func waitCPU(t *testing.T, pid, ticks int) {
	t.Helper()
	testwait.For(t, "the process to use "+strconv.Itoa(ticks)+" ticks of CPU", func() bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		// Fields after the command name (which may hold spaces): state is
		// field 3, utime and stime are fields 14 and 15.
		_, rest, _ := strings.Cut(string(b), ") ")
		f := strings.Fields(rest)
		utime, _ := strconv.Atoi(f[11])
		stime, _ := strconv.Atoi(f[12])
		return utime+stime >= ticks
	})
}
