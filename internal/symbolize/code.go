package symbolize

import (
	"debug/elf"
)

// These methods answer questions about a process's code itself, for
// checking unwound call stacks (package callstack). Like Resolve they work
// after the process exited, from the modules captured before.

// codeAt finds pid's captured mapping holding pc and its ELF virtual
// address, without recapturing.
func (r *Resolver) codeAt(pid int, pc uint64) (*codeMapping, uint64, bool) {
	r.mu.RLock()
	p := r.procs[pid]
	r.mu.RUnlock()
	if p == nil {
		return nil, 0, false
	}
	m, ok := p.find(pc)
	if !ok || m.mod == nil {
		return nil, 0, false
	}
	vaddr, ok := m.mod.VAddr(pc - m.start + m.offset)
	return m, vaddr, ok
}

// FuncStart returns the address, in pid, of the first instruction of the
// function holding addr, when a symbol covers it.
func (r *Resolver) FuncStart(pid int, addr uint64) (uint64, bool) {
	m, vaddr, ok := r.codeAt(pid, addr)
	if !ok {
		return 0, false
	}
	start, ok := m.module().funcStart(vaddr)
	if !ok {
		return 0, false
	}
	return addr - (vaddr - start), true
}

// CodeBefore returns the n bytes of code that end just before addr in pid
// (for a return address, the tail of the call instruction).
func (r *Resolver) CodeBefore(pid int, addr uint64, n int) ([]byte, bool) {
	if addr < uint64(n) {
		return nil, false
	}
	m, vaddr, ok := r.codeAt(pid, addr-uint64(n))
	if !ok {
		return nil, false
	}
	return m.module().readCode(vaddr, n)
}

// InPLT reports whether addr lies in a procedure linkage table (.plt,
// .plt.sec, .plt.got): a call there goes on to another function.
func (r *Resolver) InPLT(pid int, addr uint64) bool {
	m, vaddr, ok := r.codeAt(pid, addr)
	return ok && m.module().inPLT(vaddr)
}

func (m *Module) funcStart(vaddr uint64) (start uint64, ok bool) {
	m.symOnce.Do(m.loadSymbols)
	t := m.syms
	if t == nil {
		return 0, false
	}
	i := searchLast(len(t.syms), func(i int) bool { return t.syms[i].addr <= vaddr })
	if i < 0 {
		return 0, false
	}
	s := t.syms[i]
	if s.size != 0 && vaddr-s.addr >= s.size {
		return 0, false
	}
	return s.addr, true
}

func (m *Module) readCode(vaddr uint64, n int) (b []byte, ok bool) {
	_ = guard("read code", func() error {
		for _, p := range m.f.Progs {
			if p.Type != elf.PT_LOAD || vaddr < p.Vaddr || vaddr+uint64(n) > p.Vaddr+p.Filesz {
				continue
			}
			buf := make([]byte, n)
			if _, err := p.ReadAt(buf, int64(vaddr-p.Vaddr)); err != nil {
				return err
			}
			b, ok = buf, true
			return nil
		}
		return nil
	})
	return b, ok
}

func (m *Module) inPLT(vaddr uint64) bool {
	for _, s := range m.f.Sections {
		switch s.Name {
		case ".plt", ".plt.sec", ".plt.got":
			if vaddr >= s.Addr && vaddr < s.Addr+s.Size {
				return true
			}
		}
	}
	return false
}
