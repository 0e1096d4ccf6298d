package session

import (
	"github.com/memtrace/memtrace/allocator"
)

// jvmProbes are the JVM category probes of the first libjvm.so in mods
// (os::malloc and os::realloc, entry only); the table learns the
// categories' names, read from that library. A libjvm.so without its
// symbol table gives none, with a warning: the JVM is traced all the same.
func (s *session) jvmProbes(pid int, mods []allocator.Module) []allocator.Probe {
	for _, m := range mods {
		if !allocator.IsJVM(m) {
			continue
		}
		probes, names, err := allocator.JVMProbes(m)
		if err != nil {
			s.log.Warn("JVM categories unavailable", "pid", pid, "err", err)
			return nil
		}
		s.table.SetJVMCategories(uint32(pid), names)
		return probes
	}
	return nil
}
