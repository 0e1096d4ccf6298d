package footprint

import (
	"fmt"
	"slices"
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

// jvmHeaps are a JVM's heaps: the Java heap and the class space, reserved
// as its counters c say and found in vmas by that size (their committed
// and resident bytes are then the mappings'; the counters' committed
// bytes lag: HotSpot updates them at collections), Metaspace's nodes, and
// the code cache by its executable anonymous mappings.
func jvmHeaps(vmas []vma, c perfCounters, mem memory) []ManagedHeap {
	var out []ManagedHeap
	var taken []span // the reservations located
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
		locate(&h, vmas, &taken)
		out = append(out, h)
	}
	msMax, okMS := c.longs["sun.gc.metaspace.maxCapacity"]
	ccsMax := max(c.longs["sun.gc.compressedclassspace.maxCapacity"], 0)
	ccsCap := max(c.longs["sun.gc.compressedclassspace.capacity"], 0)
	var classSpace *ManagedHeap
	if ccsMax > 0 {
		h := ManagedHeap{Name: "Class space", Source: "hsperfdata"}
		h.Reserved, h.Committed = pageDown(ccsMax), uint64(ccsCap)
		locate(&h, vmas, &taken)
		classSpace = &h
	}
	if h, ok := metaspace(vmas, taken, mem); ok {
		out = append(out, h)
	} else if okMS && msMax > ccsMax {
		// Metaspace's counters include the class space: the rest is the
		// metadata of classes.
		h := ManagedHeap{Name: "Metaspace", Source: "hsperfdata"}
		h.Reserved = uint64(msMax - ccsMax)
		h.Committed = uint64(max(c.longs["sun.gc.metaspace.capacity"]-ccsCap, 0))
		out = append(out, h)
	}
	if classSpace != nil {
		out = append(out, *classSpace)
	}
	if h, ok := codeCache(vmas); ok {
		out = append(out, h)
	}
	return out
}

// locate finds h's reservation by its size; found, its committed and
// resident bytes are the mappings'.
func locate(h *ManagedHeap, vmas []vma, taken *[]span) {
	if st, ok := findSpan(vmas, -1, h.Reserved, h.Committed); ok {
		h.Committed, h.Resident, h.Located = st.Committed, st.Resident, true
		*taken = append(*taken, st)
	}
}

// metaspaceNode is the size of HotSpot's Metaspace reservations (a
// VirtualSpaceNode: 16 root chunks of 4 MiB, aligned to one).
const (
	metaspaceNode  = 64 << 20
	metaspaceAlign = 4 << 20
)

// metaspace finds Metaspace's nodes outside the class space: anonymous
// reservations of 64 MiB on a 4 MiB boundary that are no arena of glibc's
// (those are the same size, on a 64 MiB boundary, and begin with
// glibc's heap_info).
func metaspace(vmas []vma, taken []span, mem memory) (ManagedHeap, bool) {
	h := ManagedHeap{Name: "Metaspace", Source: "maps", Located: true}
	for i := 0; i < len(vmas); i++ {
		v := &vmas[i]
		if v.start%metaspaceAlign != 0 || v.inode != 0 || v.path != "" || glibcHeap(v, mem) {
			continue
		}
		st, ok := findSpan(vmas, i, metaspaceNode, 0)
		if !ok || slices.ContainsFunc(taken, func(t span) bool { return t.start < st.end && st.start < t.end }) {
			continue
		}
		h.Reserved += st.Reserved
		h.Committed += st.Committed
		h.Resident += st.Resident
		for i+1 < len(vmas) && vmas[i+1].start < st.end {
			i++
		}
	}
	return h, h.Reserved > 0
}

func pageDown(n int64) uint64 { return uint64(max(n, 0)) &^ (1<<pageShift - 1) }

// heapPart reports whether v may be part of a JVM reservation: anonymous
// memory, or a CDS archive's heap regions mapped into the Java heap.
func heapPart(v *vma) bool {
	return v.inode == 0 && v.path == "" || strings.HasSuffix(v.path, ".jsa")
}

// span is a run of adjacent mappings and its states.
type span struct {
	start, end uint64
	State
}

// findSpan finds a reservation of size bytes: adjacent mappings that may
// be a JVM's, beginning and ending on mapping boundaries (a reservation
// is one mmap; the kernel splits it where permissions differ), beginning
// at vmas[at], or anywhere when at is -1. Of several, the one
// whose accessible bytes are closest to committed wins, then the one most
// resident (the heap in use, not an idle reservation of the same size).
func findSpan(vmas []vma, at int, size, committed uint64) (span, bool) {
	var best span
	found := false
	var bestDist uint64
	lo, hi := 0, len(vmas)
	if at >= 0 {
		lo, hi = at, min(at+1, len(vmas))
	}
	for i := lo; i < hi; i++ {
		if !heapPart(&vmas[i]) {
			continue
		}
		sp := span{start: vmas[i].start}
		for j := i; j < len(vmas) && heapPart(&vmas[j]) && (j == i || vmas[j].start == vmas[j-1].end); j++ {
			v := &vmas[j]
			if v.end-sp.start > size {
				break
			}
			sp.end = v.end
			sp.Reserved += v.end - v.start
			sp.Resident += v.rss
			if v.accessible() {
				sp.Committed += v.end - v.start
			}
			if sp.Reserved == size {
				d := max(sp.Committed, committed) - min(sp.Committed, committed)
				if !found || d < bestDist || d == bestDist && sp.Resident > best.Resident {
					best, bestDist, found = sp, d, true
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
