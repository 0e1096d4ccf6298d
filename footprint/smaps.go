package footprint

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
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

// parseSmaps reads /proc/PID/smaps. Only the header, Rss and Pss lines
// matter.
func parseSmaps(r io.Reader) ([]vma, error) {
	var out []vma
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		key, rest, _ := bytes.Cut(line, []byte{' '})
		if key[len(key)-1] == ':' {
			if len(out) > 0 && (string(key) == "Rss:" || string(key) == "Pss:") {
				kb, err := kbField(rest)
				if err != nil {
					return nil, err
				}
				if key[0] == 'R' {
					out[len(out)-1].rss = kb << 10
				} else {
					out[len(out)-1].pss = kb << 10
				}
			}
			continue
		}
		v, err := parseHeader(line)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read smaps: %w", err)
	}
	return out, nil
}

// parseHeader parses "start-end perms offset dev inode [path]".
func parseHeader(line []byte) (vma, error) {
	f := bytes.Fields(line)
	if len(f) < 5 {
		return vma{}, fmt.Errorf("smaps line %q: too few fields", line)
	}
	lo, hi, ok := bytes.Cut(f[0], []byte{'-'})
	if !ok || len(f[1]) != 4 {
		return vma{}, fmt.Errorf("smaps line %q: no range", line)
	}
	start, err1 := strconv.ParseUint(string(lo), 16, 64)
	end, err2 := strconv.ParseUint(string(hi), 16, 64)
	inode, err3 := strconv.ParseUint(string(f[4]), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return vma{}, fmt.Errorf("smaps line %q: bad number", line)
	}
	v := vma{start: start, end: end, perms: string(f[1]), inode: inode}
	if len(f) > 5 {
		// A path may hold spaces ("/dev/zero (deleted)"): keep the rest whole.
		i := bytes.Index(line, f[5])
		v.path = string(line[i:])
	}
	return v, nil
}

// kbField parses "   1234 kB".
func kbField(b []byte) (uint64, error) {
	b = bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(b), []byte("kB")))
	n, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("smaps field %q: %w", b, err)
	}
	return n, nil
}

// MemTotal returns the machine's memory in bytes: /proc/meminfo's MemTotal.
func MemTotal() (uint64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	_, rest, ok := bytes.Cut(b, []byte("MemTotal:"))
	if !ok {
		return 0, fmt.Errorf("meminfo: no MemTotal")
	}
	line, _, _ := bytes.Cut(rest, []byte{'\n'})
	kb, err := kbField(line)
	return kb << 10, err
}

// parseStatus reads RssAnon, RssFile and RssShmem from /proc/PID/status,
// and VmSwap where the kernel has it.
func parseStatus(b []byte, r *Reading) error {
	found, err := StatusBytes(b, map[string]*uint64{"RssAnon": &r.RSSAnon, "RssFile": &r.RSSFile, "RssShmem": &r.RSSShmem})
	if err != nil {
		return err
	}
	if _, err := StatusBytes(b, map[string]*uint64{"VmSwap": &r.Swap}); err != nil {
		return err
	}
	if found != 3 {
		// A kernel thread, or a zombie whose memory is gone.
		return fmt.Errorf("status: no RssAnon, RssFile and RssShmem")
	}
	r.RSS = r.RSSAnon + r.RSSFile + r.RSSShmem
	return nil
}

// StatusBytes reads the fields of a /proc/PID/status that dst names
// ("VmRSS:\t  1234 kB") into them, in bytes, and returns how many it
// found.
func StatusBytes(b []byte, dst map[string]*uint64) (int, error) {
	found := 0
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		key, rest, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		d := dst[string(key)]
		if d == nil {
			continue
		}
		kb, err := kbField(rest)
		if err != nil {
			return found, err
		}
		*d = kb << 10
		found++
	}
	return found, nil
}
