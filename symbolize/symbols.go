package symbolize

import (
	"cmp"
	"debug/elf"
	"slices"
	"strings"
	"sync/atomic"
)

// symbol is one function symbol; size 0 means the size is unknown.
type symbol struct {
	addr, size uint64
	name       string
}

// symbolTable holds function symbols sorted by address, one per address.
// Names are demangled on first use and remembered, so a warm lookup does no
// demangling and a cold table does not demangle names never asked for.
type symbolTable struct {
	syms   []symbol
	pretty []atomic.Pointer[string]
}

// sttGNUIFunc is STT_GNU_IFUNC: an indirect function such as libc's memcpy
// resolver, still code worth naming.
const sttGNUIFunc = elf.STT_LOOS

// collectFuncs keeps the defined function symbols of syms.
func collectFuncs(dst []rankedSymbol, syms []elf.Symbol) []rankedSymbol {
	for _, s := range syms {
		typ := elf.ST_TYPE(s.Info)
		if typ != elf.STT_FUNC && typ != sttGNUIFunc {
			continue
		}
		if s.Value == 0 || s.Section == elf.SHN_UNDEF || s.Name == "" {
			continue
		}
		dst = append(dst, rankedSymbol{
			symbol:  symbol{addr: s.Value, size: s.Size, name: stripVersion(s.Name)},
			binding: elf.ST_BIND(s.Info),
		})
	}
	return dst
}

// stripVersion removes a "@VERSION" or "@@VERSION" suffix, which some tools
// leave in .symtab names.
func stripVersion(name string) string {
	if i := strings.IndexByte(name, '@'); i > 0 {
		return name[:i]
	}
	return name
}

// rankedSymbol carries what is needed to choose among aliases.
type rankedSymbol struct {
	symbol
	binding elf.SymBind
}

// better reports whether a should name an address rather than b when both
// start there (malloc over __libc_malloc, calloc over __libc_calloc):
// fewer leading underscores, then a known size, then global over weak over
// local binding, then the shorter name, then the smaller name.
func better(a, b rankedSymbol) bool {
	if ua, ub := leadingUnderscores(a.name), leadingUnderscores(b.name); ua != ub {
		return ua < ub
	}
	if (a.size != 0) != (b.size != 0) {
		return a.size != 0
	}
	if ra, rb := bindRank(a.binding), bindRank(b.binding); ra != rb {
		return ra < rb
	}
	if len(a.name) != len(b.name) {
		return len(a.name) < len(b.name)
	}
	return a.name < b.name
}

func leadingUnderscores(s string) int {
	n := 0
	for n < len(s) && s[n] == '_' {
		n++
	}
	return n
}

func bindRank(b elf.SymBind) int {
	switch b {
	case elf.STB_GLOBAL:
		return 0
	case elf.STB_WEAK:
		return 1
	}
	return 2
}

// newSymbolTable sorts the candidates and keeps the best name per address.
func newSymbolTable(cands []rankedSymbol) *symbolTable {
	slices.SortFunc(cands, func(a, b rankedSymbol) int {
		if c := cmp.Compare(a.addr, b.addr); c != 0 {
			return c
		}
		if better(a, b) {
			return -1
		}
		if better(b, a) {
			return 1
		}
		return 0
	})
	t := &symbolTable{}
	for i, c := range cands {
		if i > 0 && c.addr == cands[i-1].addr {
			// Aliases: the first is the best; keep the largest known size
			// so the address range is not cut short.
			last := &t.syms[len(t.syms)-1]
			last.size = max(last.size, c.size)
			continue
		}
		t.syms = append(t.syms, c.symbol)
	}
	t.pretty = make([]atomic.Pointer[string], len(t.syms))
	return t
}

// lookup returns the demangled name of the function holding vaddr, or "".
// With sizes, the symbol must contain vaddr; a sizeless symbol (hand-written
// assembly, some stripped tables) covers up to the next symbol.
func (t *symbolTable) lookup(vaddr uint64) string {
	if t == nil {
		return ""
	}
	i := searchLast(len(t.syms), func(i int) bool { return t.syms[i].addr <= vaddr })
	if i < 0 {
		return ""
	}
	s := t.syms[i]
	if s.size != 0 && vaddr-s.addr >= s.size {
		return ""
	}
	if p := t.pretty[i].Load(); p != nil {
		return *p
	}
	name := demangleName(s.name)
	t.pretty[i].Store(&name)
	return name
}

// searchLast returns the largest i in [0, n) for which ok(i) holds, ok
// being true for a prefix of the indexes, or -1 if it holds for none.
func searchLast(n int, ok func(int) bool) int {
	lo, hi := 0, n // invariant: ok holds below lo, fails at and above hi
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if ok(mid) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo - 1
}
