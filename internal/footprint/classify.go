package footprint

import "slices"

// memory reads a process's memory and residency; procMemory is the real one.
type memory interface {
	// read fills b from the process's memory at addr.
	read(b []byte, addr uint64) error
	// resident returns how many bytes of [start, end) are in RAM.
	resident(start, end uint64) (uint64, error)
}

// classify explains the mappings' resident bytes: every VMA's Rss goes to
// exactly one category (a VMA shared by tracked ranges and other memory is
// split by pagemap), so the categories add up to the sum over smaps.
// sps are the threads' stack pointers; gh is a Go program's heap (nil for
// other programs), whose arenas come first: a thread's stack pointer in
// them is a goroutine's or a g0's, on the heap.
func classify(vmas []vma, sps []uint64, o Options, gh *goHeap, mem memory) Reading {
	r := Reading{Ranges: make([]State, len(o.Ranges))}
	if gh != nil {
		r.GoHeapSource = gh.source
		// A stack pointer in the arenas is a goroutine's: no mapping's
		// stack, even one the kernel merged with an arena.
		sps = slices.DeleteFunc(slices.Clone(sps), func(sp uint64) bool {
			n, _ := gh.overlap(sp, sp+1)
			return n > 0
		})
	}
	ri := 0 // the first range that may overlap the current VMA
	for i := range vmas {
		v := &vmas[i]
		if !v.anonymous() {
			// Files, shared memory, the vdso: all counted by the kernel
			// as file or shmem pages, private copies apart (the file's).
			r.FileResident += v.rss
			continue
		}
		for ri < len(o.Ranges) && o.Ranges[ri].End <= v.start {
			ri++
		}
		rest := v.rss
		inGo, allGo := gh.overlap(v.start, v.end)
		var goRes uint64
		if inGo > 0 {
			res := v.rss
			if !allGo {
				res = min(goResident(gh, v, mem), rest)
			}
			rest -= res
			goRes = res
			r.GoHeap.Reserved += inGo
			if v.accessible() {
				r.GoHeap.Committed += inGo
			}
			r.GoHeap.Resident += res
		}
		stack := !allGo && (v.path == "[stack]" || holdsSP(v, sps) ||
			(i > 0 && ri < len(o.Ranges) && o.Ranges[ri] == Range{vmas[i-1].start, v.end} && threadGuard(&vmas[i-1], v)))
		tracked := false
		for j := ri; j < len(o.Ranges) && o.Ranges[j].Start < v.end; j++ {
			tracked = true
			g := o.Ranges[j]
			lo, hi := max(g.Start, v.start), min(g.End, v.end)
			var res uint64
			if g.Start <= v.start && v.end <= g.End {
				res = v.rss // the VMA lies inside the range: smaps has it
			} else if n, err := mem.resident(lo, hi); err == nil {
				res = n
			}
			st := &r.Ranges[j]
			st.Reserved += hi - lo
			if v.accessible() {
				st.Committed += hi - lo
			}
			st.Resident += res
			if n, _ := gh.overlap(lo, hi); n > 0 {
				// A cgo program's runtime maps its heap through libc's
				// mmap: the range is its call site's, the bytes the Go
				// heap's, counted above (a range is in an arena or not).
				continue
			}
			res = min(res, rest)
			rest -= res
			if !stack {
				r.AnonResident += res
			}
		}
		if o.Glibc && !stack && !tracked && rest > 0 && v.path == "" && inGo == 0 {
			// Large blocks at its start, merged with other memory after them.
			if end := glibcChunksEnd(v, mem); end > v.start && end < v.end {
				if res, err := mem.resident(v.start, end); err == nil {
					res = min(res, rest)
					r.HeapResident += res
					rest -= res
				}
			}
		}
		switch {
		case stack:
			r.StackResident += v.rss - goRes // tracked parts included: not counted as anon
		case rest == 0:
		case v.path == "[heap]":
			r.HeapResident += rest
		case tracked && !o.Glibc:
			// The rest of a VMA merged with a tracked range: the allocator's.
			r.HeapResident += rest
		case tracked:
			// glibc's large blocks that the kernel merged with a tracked
			// range (a cgo program's runtime maps through libc's mmap, next
			// to them) are found by their headers in the gaps.
			r.HeapResident += glibcGaps(v, o.Ranges[ri:], gh, rest, mem)
		case o.Glibc && glibcHeap(v, mem):
			r.HeapResident += rest
		case i > 0 && staticData(&vmas[i-1], v):
			r.FileResident += rest
		case gh != nil && !o.Glibc:
			r.GoRuntimeResident += rest // a static Go program: all the runtime's
		case !o.Glibc:
			r.HeapResident += rest
		case i > 0 && threadGuard(&vmas[i-1], v):
			r.StackResident += rest
		case o.Python && v.path == "":
			r.HeapResident += rest // pymalloc's arenas (Options.Python)
		case gh != nil:
			r.GoRuntimeResident += rest // a cgo program: not glibc's, no thread's stack
		}
	}
	return r
}

// holdsSP reports whether a thread's stack pointer lies in v.
func holdsSP(v *vma, sps []uint64) bool {
	for _, sp := range sps {
		if sp >= v.start && sp < v.end {
			return true
		}
	}
	return false
}

// staticData reports whether v is the .bss of the file mapped right below
// it: the zero-filled rest of a writable segment, which the kernel maps as
// anonymous memory. It is counted with its file.
func staticData(prev, v *vma) bool {
	return prev.end == v.start && !prev.anonymous() && prev.inode != 0 && prev.perms[1] == 'w'
}

// threadGuard reports whether prev is the guard page of a thread stack v,
// as glibc lays them out: a small PROT_NONE mapping right below it. It
// serves threads whose stack pointer could not be read (running ones, or
// gone: at a process's exit stop its other threads have ended, their
// stacks still mapped). For a traced mmap (glibc maps a stack with its
// guard in one call) the guard and the stack must be the whole traced
// range: a PROT_NONE gap in a reservation committed piecewise is no guard.
func threadGuard(prev, v *vma) bool {
	return prev.end == v.start && prev.anonymous() && !prev.accessible() &&
		prev.end-prev.start <= 1<<20 && v.accessible()
}

// goResident is the resident part of v inside a Go program's arenas, for
// a VMA that lies partly outside them.
func goResident(gh *goHeap, v *vma, mem memory) uint64 {
	var n uint64
	for _, a := range gh.arenas {
		lo, hi := max(a.Start, v.start), min(a.End, v.end)
		if lo >= hi {
			continue
		}
		if res, err := mem.resident(lo, hi); err == nil {
			n += res
		}
	}
	return n
}

// glibcGaps is the resident part, at most rest, of the gaps between
// tracked ranges in v that glibc's headers say are its own.
func glibcGaps(v *vma, ranges []Range, gh *goHeap, rest uint64, mem memory) uint64 {
	var n uint64
	at := v.start
	for j := 0; at < v.end && n < rest; j++ {
		end := v.end
		if j < len(ranges) && ranges[j].Start < v.end {
			end = max(ranges[j].Start, at)
		}
		gap := vma{start: at, end: end, perms: v.perms}
		if inGo, _ := gh.overlap(at, end); at < end && inGo == 0 && glibcHeap(&gap, mem) {
			if res, err := mem.resident(at, end); err == nil {
				n += min(res, rest-n)
			}
		}
		if j >= len(ranges) || ranges[j].Start >= v.end {
			break
		}
		at = max(at, ranges[j].End)
	}
	return n
}
