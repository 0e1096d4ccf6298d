package footprint

import (
	"fmt"
	"strings"
)

// ManagedHeap is a runtime's own heap, by NMT's states: the Java heap,
// Metaspace, its class space and the code cache of a JVM (from its
// performance counters and its mappings), V8's heap (from the call sites
// of its page allocator: package report). Its pages are also in the RSS
// breakdown, where the kernel's view puts them (mmap, files, unexplained):
// a managed heap says what they are, it is no part of the breakdown.
type ManagedHeap struct {
	Name string
	State
	// Located: the heap's address range was found in the mappings, so
	// Resident was read; otherwise Resident is 0, unknown.
	Located bool
	// Source says where reserved and committed come from: "hsperfdata"
	// (the JVM's counters), "maps" (the mappings alone), "mmap" (traced
	// mmap calls).
	Source string
}

// jvmHeaps are a JVM's heaps: the Java heap, Metaspace and class space by
// its counters c, found in vmas by their reserved size, and the code
// cache by its executable anonymous mappings.
func jvmHeaps(vmas []vma, c perfCounters) []ManagedHeap {
	var out []ManagedHeap
	// The generations' capacities (committed) and maximum capacities
	// (reserved). G1 has two ("young", "old"), each bounded by the whole
	// heap: its reservation is their largest; the others' generations
	// split theirs.
	var maxSum, maxMax, capSum int64
	for g := 0; ; g++ {
		m, ok := c.longs[fmt.Sprintf("sun.gc.generation.%d.maxCapacity", g)]
		if !ok {
			break
		}
		maxSum += max(m, 0)
		maxMax = max(maxMax, m)
		capSum += max(c.longs[fmt.Sprintf("sun.gc.generation.%d.capacity", g)], 0)
	}
	if maxSum > 0 {
		reserved := maxSum
		if c.strings["sun.gc.generation.0.name"] == "young" { // G1
			reserved = maxMax
		}
		h := ManagedHeap{Name: "Java heap", Source: "hsperfdata"}
		h.Reserved = pageDown(reserved)
		h.Committed = min(pageDown(capSum), h.Reserved)
		h.Resident, h.Located = spanResident(vmas, h.Reserved, h.Committed)
		out = append(out, h)
	}
	msMax, okMS := c.longs["sun.gc.metaspace.maxCapacity"]
	ccsMax := max(c.longs["sun.gc.compressedclassspace.maxCapacity"], 0)
	ccsCap := max(c.longs["sun.gc.compressedclassspace.capacity"], 0)
	if okMS && msMax >= ccsMax {
		// Metaspace's counters include the class space: the rest is the
		// metadata of classes, in reservations of 64 MiB that nothing
		// tells from glibc's arenas by size: not located.
		h := ManagedHeap{Name: "Metaspace", Source: "hsperfdata"}
		h.Reserved = uint64(msMax - ccsMax)
		h.Committed = uint64(max(c.longs["sun.gc.metaspace.capacity"]-ccsCap, 0))
		out = append(out, h)
	}
	if ccsMax > 0 {
		h := ManagedHeap{Name: "Class space", Source: "hsperfdata"}
		h.Reserved, h.Committed = pageDown(ccsMax), uint64(ccsCap)
		h.Resident, h.Located = spanResident(vmas, h.Reserved, h.Committed)
		out = append(out, h)
	}
	if h, ok := codeCache(vmas); ok {
		out = append(out, h)
	}
	return out
}

func pageDown(n int64) uint64 { return uint64(max(n, 0)) &^ (1<<pageShift - 1) }

// heapPart reports whether v may be part of a JVM reservation: anonymous
// memory, or a CDS archive's heap regions mapped into the Java heap.
func heapPart(v *vma) bool {
	return v.inode == 0 && v.path == "" || strings.HasSuffix(v.path, ".jsa")
}

// spanResident finds the reservation of size bytes: adjacent mappings
// that may be a JVM's, beginning and ending on mapping boundaries (a
// reservation is one mmap; the kernel splits it where permissions
// differ). Of several, the one whose accessible bytes are closest to
// committed wins, then the one most resident (the heap in use, not an
// idle reservation of the same size). It returns the span's resident
// bytes.
func spanResident(vmas []vma, size, committed uint64) (uint64, bool) {
	best, found := uint64(0), false
	var bestDist uint64
	for i := range vmas {
		if !heapPart(&vmas[i]) {
			continue
		}
		start := vmas[i].start
		var acc, res uint64
		for j := i; j < len(vmas) && heapPart(&vmas[j]) && (j == i || vmas[j].start == vmas[j-1].end); j++ {
			v := &vmas[j]
			if v.end-start > size {
				break
			}
			res += v.rss
			if v.accessible() {
				acc += v.end - v.start
			}
			if v.end-start == size {
				d := max(acc, committed) - min(acc, committed)
				if !found || d < bestDist || d == bestDist && res > best {
					best, bestDist, found = res, d, true
				}
				break
			}
		}
	}
	return best, found
}

// codeCache finds HotSpot's code cache: its reservation is committed
// executable and writable (rwx) at the start of each segment, PROT_NONE
// in between. The span runs from the first anonymous rwx mapping over the
// adjacent rwx and PROT_NONE ones.
func codeCache(vmas []vma) (ManagedHeap, bool) {
	h := ManagedHeap{Name: "Code cache", Source: "maps", Located: true}
	for i := range vmas {
		if !codeCachePart(&vmas[i]) || vmas[i].perms[:3] != "rwx" {
			continue
		}
		for j := i; j < len(vmas) && codeCachePart(&vmas[j]) && (j == i || vmas[j].start == vmas[j-1].end); j++ {
			v := &vmas[j]
			h.Reserved += v.end - v.start
			if v.accessible() {
				h.Committed += v.end - v.start
			}
			h.Resident += v.rss
		}
		return h, true
	}
	return ManagedHeap{}, false
}

func codeCachePart(v *vma) bool {
	return v.inode == 0 && v.path == "" && (v.perms[:3] == "rwx" || v.perms[:3] == "---")
}
