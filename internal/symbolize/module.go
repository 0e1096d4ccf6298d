package symbolize

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/memtrace/memtrace/internal/gopclntab"
)

// Module is one ELF file (executable or shared library) opened for
// symbolization. Opening reads only the headers; the symbol table and the
// line table are built on first use, each once. Safe for concurrent use.
//
// The file comes from outside (any process's mappings), so every step that
// parses it recovers from panics in debug/elf or debug/dwarf and turns
// them into an error: a hostile file yields empty answers, never a crash.
type Module struct {
	f       *elf.File
	closer  io.Closer // the underlying file, if the module owns one
	segs    []segment
	buildID string

	// Separate debug files found when the module was opened (debugfile.go),
	// checked on first use; the ELF images describing the module, best
	// first, and the debug file chosen.
	debugCands []debugCandidate
	srcOnce    sync.Once
	srcs       []*elf.File
	srcErr     error
	debugFile  *os.File
	debugPath  string

	// A download from debuginfod under way or done, and the module that
	// reads the file it brought (fetched.go).
	fetch     *fetch
	fetchOnce sync.Once
	fetched   atomic.Pointer[Module]

	symOnce sync.Once
	syms    *symbolTable
	symErr  error
	// symsRead is set once loadSymbols is done (Prepare's test).
	symsRead atomic.Bool

	// DWARF: the line table and the index of inlined code (inline.go).
	dwarfOnce sync.Once
	dw        *dwarfInfo
	dwarfErr  error
	// lookMu makes one line and inline look-up at a time: debug/dwarf's
	// Data is not safe for readers made on two goroutines (it caches a
	// unit's DWARF 5 bases as a reader seeks), and a report's first sites
	// are named ahead beside the loop (session's nameAhead).
	lookMu sync.Mutex

	// A Go executable's function table, for lines and inlined calls where
	// it has no DWARF.
	goOnce sync.Once
	goTab  *gopclntab.Table

	// execSegs are the executable PT_LOAD segments, for checking call
	// targets; sites remembers resolved call sites (callsite.go).
	execSegs []segment
	sites    siteCache
}

// NewModule reads the ELF headers from r. The module reads from r on later
// lookups, so r must stay usable for the module's lifetime.
func NewModule(r io.ReaderAt) (*Module, error) {
	return newModule(r, nil)
}

// OpenModule opens the ELF file at path. Close releases it.
func OpenModule(path string) (*Module, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open module: %w", err)
	}
	m, err := newModule(f, f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open module %s: %w", path, err)
	}
	return m, nil
}

func newModule(r io.ReaderAt, closer io.Closer) (m *Module, err error) {
	err = guard("read elf headers", func() error {
		f, err := elf.NewFile(r)
		if err != nil {
			return err
		}
		m = &Module{f: f, closer: closer, segs: loadSegments(f), buildID: buildID(f), execSegs: execSegments(f)}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// guard runs parse and turns a panic inside it into an error: debug/elf and
// debug/dwarf can panic on malformed input.
func guard(what string, parse func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s: malformed input: %v", what, p)
		}
	}()
	if err := parse(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// Close releases the file the module was opened from, if it owns one, and
// its separate debug file.
func (m *Module) Close() error {
	m.srcOnce.Do(func() {}) // no loading after this
	var errs []error
	m.fetchOnce.Do(func() {}) // nor a module from a download
	if n := m.fetched.Load(); n != nil {
		errs = append(errs, n.Close())
	}
	for _, c := range m.debugCands {
		errs = append(errs, c.file.Close())
	}
	m.debugCands = nil
	if m.debugFile != nil {
		errs = append(errs, m.debugFile.Close())
	}
	if m.closer != nil {
		errs = append(errs, m.closer.Close())
	}
	return errors.Join(errs...)
}

// DebugFile is the path of the separate debug file that describes the
// module (found by build-id or .gnu_debuglink), or "" when there is none.
// It looks for it on first call if symbols or lines have not yet. A file
// downloaded from debuginfod counts once the download is done.
func (m *Module) DebugFile() string {
	if n := m.latest(); n != m {
		return n.DebugFile()
	}
	m.srcOnce.Do(m.loadSources)
	return m.debugPath
}

// BuildID is the GNU build-id in lowercase hex, or "" if the file has none.
func (m *Module) BuildID() string { return m.buildID }

// VAddr translates an offset in the file (as /proc/PID/maps gives for a
// mapping's start) to the ELF virtual address of the byte loaded from it.
func (m *Module) VAddr(fileOffset uint64) (uint64, bool) {
	return vaddrOf(m.segs, fileOffset)
}

// Function names the function holding the ELF virtual address vaddr, or "".
func (m *Module) Function(vaddr uint64) string {
	m.symOnce.Do(m.loadSymbols)
	return m.syms.lookup(vaddr)
}

// Line gives the source file and line of the instruction at vaddr, or
// ("", 0) when no debug information covers it.
func (m *Module) Line(vaddr uint64) (file string, line int) {
	m.lookMu.Lock()
	defer m.lookMu.Unlock()
	return m.line(vaddr)
}

func (m *Module) line(vaddr uint64) (file string, line int) {
	m.dwarfOnce.Do(m.loadDWARF)
	if m.dw == nil {
		// No DWARF (go build -ldflags=-w): a Go executable's own table
		// has the lines (gopclntab.Table.Line).
		if t := m.goTable(); t != nil {
			if f, l, ok := t.Line(vaddr); ok {
				return f, l
			}
		}
		return "", 0
	}
	return m.dw.lineAt(vaddr)
}

// goTable is the module's Go function table, read once (nil if it has none).
func (m *Module) goTable() *gopclntab.Table {
	m.goOnce.Do(m.loadGo)
	return m.goTab
}

func (m *Module) loadGo() {
	_ = guard("read Go function table", func() error {
		if t, err := gopclntab.Read(m.f); err == nil {
			t.FindInlineTrees(m.f)
			m.goTab = t
		}
		return nil
	})
}

// Load builds the symbol and line tables now rather than on first use, and
// reports what went wrong building them. Lookups work either way.
func (m *Module) Load() error {
	m.srcOnce.Do(m.loadSources)
	m.symOnce.Do(m.loadSymbols)
	m.dwarfOnce.Do(m.loadDWARF)
	return errors.Join(m.srcErr, m.symErr, m.dwarfErr)
}

func (m *Module) loadSymbols() {
	m.symErr = guard("read symbols", func() error {
		var cands []rankedSymbol
		var errs []error
		for _, src := range m.debugSources() {
			var goTable func() *gopclntab.Table // the one Line and inlineChain read
			if src == m.f {
				goTable = m.goTable
			}
			var err error
			cands, err = appendFunctionSymbols(cands, src, goTable)
			errs = append(errs, err)
		}
		m.syms = newSymbolTable(cands)
		return errors.Join(errs...)
	})
	m.symsRead.Store(true)
}

// functionSymbols reads the function symbols of .symtab and .dynsym. Each
// table is optional: strip removes .symtab, static executables have no
// .dynsym. A Go executable without .symtab (-ldflags=-s) still names its
// functions in its function table (.gopclntab), which the runtime keeps:
// goTable's, or f's read here when goTable is nil.
func functionSymbols(f *elf.File, goTable func() *gopclntab.Table) ([]rankedSymbol, error) {
	return appendFunctionSymbols(nil, f, goTable)
}

// appendFunctionSymbols is functionSymbols appending to cands.
func appendFunctionSymbols(cands []rankedSymbol, f *elf.File, goTable func() *gopclntab.Table) ([]rankedSymbol, error) {
	var errs []error
	var err error
	had := len(cands)
	if TablesFit(f, elf.SHT_SYMTAB) {
		cands, err = readFuncs(cands, f, elf.SHT_SYMTAB)
	} else {
		err = errTableTooLarge
	}
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		errs = append(errs, fmt.Errorf("symtab: %w", err))
	}
	if len(cands) == had {
		var tab *gopclntab.Table
		if goTable != nil {
			tab = goTable()
		} else {
			tab, _ = gopclntab.Read(f)
		}
		cands = goFuncs(cands, tab)
	}
	if TablesFit(f, elf.SHT_DYNSYM) {
		cands, err = readFuncs(cands, f, elf.SHT_DYNSYM)
	} else {
		err = errTableTooLarge
	}
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		errs = append(errs, fmt.Errorf("dynsym: %w", err))
	}
	return cands, errors.Join(errs...)
}

// goFuncs adds the functions of a Go function table (none when tab is nil).
func goFuncs(dst []rankedSymbol, tab *gopclntab.Table) []rankedSymbol {
	if tab == nil {
		return dst
	}
	for _, fn := range tab.Funcs {
		dst = append(dst, rankedSymbol{
			symbol:  symbol{addr: fn.Entry, size: fn.End - fn.Entry, name: fn.Name},
			binding: elf.STB_GLOBAL,
		})
	}
	return dst
}

func (m *Module) loadDWARF() {
	m.dwarfErr = guard("read line table", func() error {
		dw, err := m.bestDWARF()
		m.dw = dw
		return err
	})
}
