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
		if !isFunc(s.Info) || s.Value == 0 || s.Section == elf.SHN_UNDEF || s.Name == "" {
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
	// rank orders aliases, newSymbolTable's key (rankOf).
	rank uint64
}

// rankOf is s's rank among the symbols at its address, lowest best (malloc
// over __libc_malloc, calloc over __libc_calloc): fewer leading
// underscores, then a known size, then global over weak over local
// binding, then the shorter name; the smaller name breaks a tie. One
// integer, so that sorting node's 170 000 candidates compares two numbers
// where it ran this chain of tests on both sides.
func rankOf(s rankedSymbol) uint64 {
	var unknown uint64
	if s.size == 0 {
		unknown = 1
	}
	return uint64(min(leadingUnderscores(s.name), 1<<20-1))<<40 | unknown<<39 |
		uint64(bindRank(s.binding))<<37 | uint64(min(len(s.name), 1<<37-1))
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
	for i := range cands {
		cands[i].rank = rankOf(cands[i])
	}
	// Sorted by address and rank only: names, often the same one from
	// .symtab and .dynsym, would be compared in full. The smaller name
	// among the best-ranked at an address is picked below.
	slices.SortFunc(cands, func(a, b rankedSymbol) int {
		if c := cmp.Compare(a.addr, b.addr); c != 0 {
			return c
		}
		return cmp.Compare(a.rank, b.rank)
	})
	t := &symbolTable{syms: make([]symbol, 0, len(cands))}
	var best rankedSymbol
	for i, c := range cands {
		if i > 0 && c.addr == cands[i-1].addr {
			// Aliases: the best ranked, then the smaller name; keep the
			// largest known size so the address range is not cut short.
			last := &t.syms[len(t.syms)-1]
			if c.rank == best.rank && c.name < last.name {
				last.name = c.name
			}
			last.size = max(last.size, c.size)
			continue
		}
		best = c
		t.syms = append(t.syms, c.symbol)
	}
	t.syms = slices.Clip(t.syms)
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
