package symbolize

import (
	"debug/elf"
	"os"
)

// A module without debug information of its own or on disk asks debuginfod
// for its debug file when it is opened, and is resolved without it until
// the file is there: the download runs in the background, so no lookup
// waits for the network (tracing goes on; a report made meanwhile has the
// names the module alone gives). Once the file is there, the module's
// lookups go to a second module that reads it (latest); sites resolved
// before are resolved again there.

// wantsDebuginfod says whether mod should ask: it has a build-id, no
// separate debug file was found for it, and it has no line table itself.
func wantsDebuginfod(mod *Module) bool {
	if mod.buildID == "" || len(mod.debugCands) > 0 {
		return false
	}
	s := mod.f.Section(".debug_line")
	return s == nil || s.Type == elf.SHT_NOBITS
}

// latest is the module to resolve m's addresses with: m, or the module
// made with its downloaded debug file once the download is done.
func (m *Module) latest() *Module {
	if m == nil || m.fetch == nil {
		return m
	}
	if n := m.fetched.Load(); n != nil {
		return n
	}
	select {
	case <-m.fetch.done:
	default:
		return m
	}
	m.fetchOnce.Do(m.useFetched)
	if n := m.fetched.Load(); n != nil {
		return n
	}
	return m
}

// useFetched makes the module that reads m's file with the downloaded
// debug file, checked as one found on disk.
func (m *Module) useFetched() {
	if m.fetch.err != nil {
		return
	}
	file, ok := m.closer.(*os.File)
	if !ok {
		return
	}
	c, err := openFetched(m.fetch.path)
	if err != nil {
		return
	}
	n, err := newModule(file, nil) // m owns the file
	if err != nil {
		c.file.Close()
		return
	}
	n.debugCands = []debugCandidate{c}
	if n.DebugFile() == "" {
		n.Close()
		return
	}
	m.fetched.Store(n)
}
