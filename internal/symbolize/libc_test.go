package symbolize

import (
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/arch/x86/x86asm"

	"github.com/memtrace/memtrace/internal/procfs"
)

// The test binary is a static Go program without libc, so libc is looked
// at in a child: cat, waiting on its input.
func startCat(t testing.TB) int {
	t.Helper()
	cmd := exec.Command("cat")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Skipf("start cat: %v", err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	// An echoed line means cat runs its own code: libc is mapped by then.
	if _, err := io.WriteString(stdin, "x\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(stdout, make([]byte, 2)); err != nil {
		t.Fatalf("cat echo: %v", err)
	}
	return cmd.Process.Pid
}

// libcTarget is a return address inside a libc function and its frame.
type libcTarget struct {
	ret  uint64
	want Frame
}

// libcTargets finds libc in pid's mappings and returns a return address one
// byte into each named function (all functions when names is empty).
// libc's first segment is loaded at address 0 of the file, so the runtime
// address is the start of the mapping at offset 0 plus the symbol value.
func libcTargets(t testing.TB, pid int, names ...string) []libcTarget {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		t.Fatal(err)
	}
	maps, err := procfs.ParseMaps(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	var path string
	var base uint64
	for _, m := range maps {
		if strings.HasSuffix(m.Path, "/libc.so.6") && m.Offset == 0 {
			path, base = m.Path, m.Start
			break
		}
	}
	if path == "" {
		t.Fatal("cat does not map libc.so.6")
	}
	ef, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD {
			if p.Vaddr != 0 || p.Off != 0 {
				t.Skipf("%s: first segment not at 0", path)
			}
			break
		}
	}
	syms, err := ef.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var text *elf.Prog
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			text = p
		}
	}
	var out []libcTarget
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Size < 2 || s.Section == elf.SHN_UNDEF {
			continue
		}
		if len(names) > 0 && !want[s.Name] {
			continue
		}
		// The return address of the function's first call instruction.
		call, end, ok := firstCall(text, s.Value, s.Size)
		if !ok {
			continue
		}
		ret := base + end
		out = append(out, libcTarget{ret: ret, want: Frame{Address: ret, CallAddress: base + call,
			Function: s.Name, Module: path, Offset: call}})
	}
	if len(out) == 0 || (len(names) > 0 && len(out) != len(names)) {
		t.Fatalf("%s: found %d of the functions %v", path, len(out), names)
	}
	return out
}

// libc's .dynsym names malloc and __libc_malloc at one address, calloc
// (weak) and __libc_calloc too: the plain names win.
func TestResolveLibc(t *testing.T) {
	pid := startCat(t)
	targets := libcTargets(t, pid, "malloc", "free", "calloc", "realloc")
	r := NewResolver(WithDebugDirs())
	defer r.Close()
	if err := r.Capture(pid); err != nil {
		t.Fatal(err)
	}
	for _, tg := range targets {
		if got := r.Resolve(pid, tg.ret); !sameFrame(got, tg.want) {
			t.Errorf("Resolve(%#x) = %s, want %s", tg.ret, showFrame(got), showFrame(tg.want))
		}
	}
}

// Resolves race with captures and Forget; run with -race.
func TestResolveConcurrent(t *testing.T) {
	pid := startCat(t)
	targets := libcTargets(t, pid, "malloc", "free", "calloc", "realloc")
	r := NewResolver(WithDebugDirs())
	defer r.Close()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				tg := targets[(g+i)%len(targets)]
				if got := r.Resolve(pid, tg.ret); !sameFrame(got, tg.want) {
					t.Errorf("Resolve(%#x) = %s, want %s", tg.ret, showFrame(got), showFrame(tg.want))
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 50 {
			if i%2 == 0 {
				r.Forget(pid)
			} else if err := r.Capture(pid); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
}

// BenchmarkResolveWarm resolves return addresses into libc functions with
// the module already parsed: the per-event cost.
func BenchmarkResolveWarm(b *testing.B) {
	pid := startCat(b)
	targets := libcTargets(b, pid)
	r := NewResolver(WithDebugDirs())
	defer r.Close()
	if err := r.Capture(pid); err != nil {
		b.Fatal(err)
	}
	for _, tg := range targets {
		r.Resolve(pid, tg.ret)
	}
	for i := 0; b.Loop(); i++ {
		tg := targets[i%len(targets)]
		if f := r.Resolve(pid, tg.ret); f.Function == "" {
			b.Fatalf("Resolve(%#x) = %s", tg.ret, showFrame(f))
		}
	}
}

// BenchmarkResolveCold is the first lookup of a fresh resolver: capture
// the process (read maps, open and parse every module's headers), then
// build libc's symbol table to resolve one address.
func BenchmarkResolveCold(b *testing.B) {
	pid := startCat(b)
	tg := libcTargets(b, pid, "malloc")[0]
	for b.Loop() {
		r := NewResolver(WithDebugDirs())
		if err := r.Capture(pid); err != nil {
			b.Fatal(err)
		}
		if f := r.Resolve(pid, tg.ret); !sameFrame(f, tg.want) {
			b.Fatalf("Resolve(%#x) = %s", tg.ret, showFrame(f))
		}
		r.Close()
	}
}

// firstCall decodes the function [start, start+size) of the text segment
// and returns the address and end of its first call instruction.
func firstCall(text *elf.Prog, start, size uint64) (call, end uint64, ok bool) {
	if text == nil || start < text.Vaddr || start+size > text.Vaddr+text.Filesz {
		return 0, 0, false
	}
	code := make([]byte, min(size, 4096))
	if _, err := text.ReadAt(code, int64(start-text.Vaddr)); err != nil {
		return 0, 0, false
	}
	for off := 0; off < len(code); {
		inst, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			return 0, 0, false
		}
		if inst.Op == x86asm.CALL {
			return start + uint64(off), start + uint64(off+inst.Len), true
		}
		off += inst.Len
	}
	return 0, 0, false
}
