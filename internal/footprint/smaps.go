package footprint

import (
	"io"

	"github.com/memtrace/memtrace/internal/procfs"
)

// vma is one mapping of /proc/PID/smaps, with the fields the footprint uses.
type vma struct {
	start, end uint64
	perms      string // "rw-p"
	inode      uint64
	path       string // "" for anonymous memory, "[heap]", "/usr/lib/…"
	rss        uint64 // bytes
	pss        uint64 // bytes, the proportional share (smaps only)
}

// accessible reports whether the mapping can be read, written or run:
// PROT_NONE address space is reserved, not committed.
func (v *vma) accessible() bool { return v.perms[:3] != "---" }

// anonymous reports whether the mapping is private memory backed by no
// file: unnamed, or the kernel's [heap] and [stack]. Shared anonymous
// memory is backed by a shmem file ("/dev/zero (deleted)", an inode).
func (v *vma) anonymous() bool {
	return v.inode == 0 && (v.path == "" || v.path == "[heap]" || v.path == "[stack]")
}

// parseSmaps reads /proc/PID/smaps (or maps: no Rss, no Pss) through procfs.
func parseSmaps(r io.Reader) ([]vma, error) {
	vs, err := procfs.ParseSmaps(r)
	if err != nil {
		return nil, err
	}
	out := make([]vma, len(vs))
	for i, v := range vs {
		out[i] = vma{start: v.Start, end: v.End, perms: v.Perms, inode: v.Inode, path: v.Path, rss: v.Rss, pss: v.Pss}
	}
	return out, nil
}

// parseStatus reads RssAnon, RssFile and RssShmem from /proc/PID/status,
// and VmSwap where the kernel has it.
func parseStatus(b []byte, r *Reading) error {
	st, err := procfs.ParseStatus(b)
	if err != nil {
		return err // a kernel thread, or a zombie whose memory is gone
	}
	r.RSSAnon, r.RSSFile, r.RSSShmem = st.RssAnon, st.RssFile, st.RssShmem
	r.Swap = st.VmSwap
	r.RSS = r.RSSAnon + r.RSSFile + r.RSSShmem
	return nil
}
