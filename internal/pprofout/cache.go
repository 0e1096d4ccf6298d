package pprofout

import (
	"sync"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/callstack"
	"github.com/memtrace/memtrace/internal/symbolize"
)

// Cache remembers what its Sources answered, per process: a call site
// looked up while its process lived still resolves after the process's
// mappings are forgotten (whole-host mode forgets them once a process's
// final records are written). Safe for concurrent use.
type Cache struct {
	src Sources

	mu       sync.Mutex
	frames   map[cacheKey]symbolize.Frame
	stacks   map[stackKey]callstack.Stack
	mappings map[cacheKey]mappingAnswer
}

type cacheKey struct {
	pid  int
	addr uint64
}

type stackKey struct {
	pid  uint32
	site aggregate.SiteKey
}

type mappingAnswer struct {
	m  symbolize.CodeMapping
	ok bool
}

// NewCache wraps src.
func NewCache(src Sources) *Cache {
	return &Cache{src: src, frames: map[cacheKey]symbolize.Frame{},
		stacks: map[stackKey]callstack.Stack{}, mappings: map[cacheKey]mappingAnswer{}}
}

// Sources returns sources answering through the cache; a nil source of
// the wrapped ones stays nil.
func (c *Cache) Sources() Sources {
	var out Sources
	if c.src.Symbolizer != nil {
		out.Symbolizer = cachedSymbolizer{c}
	}
	if c.src.Stacks != nil {
		out.Stacks = cachedStacks{c}
	}
	if c.src.Mappings != nil {
		out.Mappings = cachedMappings{c}
	}
	return out
}

// Forget drops what is cached for pid (its PID may be reused).
func (c *Cache) Forget(pid uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.frames {
		if k.pid == int(pid) {
			delete(c.frames, k)
		}
	}
	for k := range c.mappings {
		if k.pid == int(pid) {
			delete(c.mappings, k)
		}
	}
	for k := range c.stacks {
		if k.pid == pid {
			delete(c.stacks, k)
		}
	}
}

// Warm looks up every heap call site of snap that has live bytes, so that
// its names outlive its process.
func (c *Cache) Warm(snap aggregate.Snapshot) {
	src := c.Sources()
	for _, p := range snap.Processes {
		for _, s := range p.Sites {
			if s.Category != aggregate.Heap || s.LiveBytes == 0 {
				continue
			}
			for _, st := range s.ByStack() { // sampled mode: each stack of the site
				if src.Stacks == nil || st.StackID < 0 || st.LiveBytes == 0 {
					continue
				}
				for _, f := range src.Stacks.Stack(p.PID, st).Frames {
					if src.Mappings != nil {
						src.Mappings.MappingOf(int(p.PID), f.CallAddress)
					}
				}
			}
			if src.Symbolizer != nil {
				f := src.Symbolizer.Resolve(int(p.PID), s.Address)
				if src.Mappings != nil {
					src.Mappings.MappingOf(int(p.PID), f.CallAddress)
				}
			}
		}
	}
}

// cached answers k from m under mu, else asks fill and keeps its answer
// when keep says it is final (a miss may resolve later: not kept).
func cached[K comparable, V any](mu *sync.Mutex, m map[K]V, k K, fill func() V, keep func(V) bool) V {
	mu.Lock()
	v, ok := m[k]
	mu.Unlock()
	if ok {
		return v
	}
	v = fill()
	if keep(v) {
		mu.Lock()
		m[k] = v
		mu.Unlock()
	}
	return v
}

type cachedSymbolizer struct{ c *Cache }

func (s cachedSymbolizer) Resolve(pid int, ret uint64) symbolize.Frame {
	return cached(&s.c.mu, s.c.frames, cacheKey{pid, ret},
		func() symbolize.Frame { return s.c.src.Symbolizer.Resolve(pid, ret) },
		func(f symbolize.Frame) bool { return f.Module != "" })
}

type cachedStacks struct{ c *Cache }

func (s cachedStacks) Stack(pid uint32, site aggregate.SiteSnapshot) callstack.Stack {
	return cached(&s.c.mu, s.c.stacks, stackKey{pid, site.Key()},
		func() callstack.Stack { return s.c.src.Stacks.Stack(pid, site) },
		func(st callstack.Stack) bool { return len(st.Frames) > 0 })
}

type cachedMappings struct{ c *Cache }

func (s cachedMappings) MappingOf(pid int, pc uint64) (symbolize.CodeMapping, bool) {
	a := cached(&s.c.mu, s.c.mappings, cacheKey{pid, pc},
		func() mappingAnswer {
			m, found := s.c.src.Mappings.MappingOf(pid, pc)
			return mappingAnswer{m, found}
		},
		func(a mappingAnswer) bool { return a.ok })
	return a.m, a.ok
}
