package tracer

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Uprobe sessions (Linux 6.13+): one program runs at a function's entry
// and at its return, and an entry that returns non-zero has the kernel
// skip that call's return. cilium/ebpf v0.22.0 (the newest release) loads
// such programs (section "uprobe.session") but creates no session link:
// BPF_LINK_CREATE is called here, as link.UprobeMulti calls it, with the
// session attach type.

// attachTraceUprobeSession is BPF_TRACE_UPROBE_SESSION (include/uapi/linux/bpf.h).
const attachTraceUprobeSession = 57

// uprobeMultiAttr is union bpf_attr's link_create with its uprobe_multi
// part, the layout link.UprobeMulti uses.
type uprobeMultiAttr struct {
	progFD, targetFD, attachType, flags uint32
	path, offsets, refCtrOffsets        uint64
	cookies                             uint64
	count, multiFlags, pid              uint32
	_                                   [4]byte
}

// linkCreateSession attaches prog as a uprobe session at the file
// offsets of path, with a cookie each, for pid (0: every process).
func linkCreateSession(prog *ebpf.Program, path string, offsets, cookies []uint64, pid uint32) (link.Link, error) {
	if len(offsets) == 0 || len(cookies) != len(offsets) {
		return nil, fmt.Errorf("uprobe session on %s: %d offsets, %d cookies", path, len(offsets), len(cookies))
	}
	p, err := unix.BytePtrFromString(path)
	if err != nil {
		return nil, fmt.Errorf("uprobe session on %s: %w", path, err)
	}
	attr := uprobeMultiAttr{
		progFD:     uint32(prog.FD()),
		attachType: attachTraceUprobeSession,
		path:       uint64(uintptr(unsafe.Pointer(p))),
		offsets:    uint64(uintptr(unsafe.Pointer(&offsets[0]))),
		cookies:    uint64(uintptr(unsafe.Pointer(&cookies[0]))),
		count:      uint32(len(offsets)),
		pid:        pid,
	}
	fd, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_LINK_CREATE, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(p)
	runtime.KeepAlive(offsets)
	runtime.KeepAlive(cookies)
	if errno != 0 {
		return nil, fmt.Errorf("create uprobe session link: %w", errno)
	}
	l, err := link.NewFromFD(int(fd))
	if err != nil {
		unix.Close(int(fd))
		return nil, fmt.Errorf("wrap uprobe session link: %w", err)
	}
	return l, nil
}

// haveUprobeSession probes for uprobe sessions as cilium/ebpf probes for
// uprobe_multi: a session link on "/" fails with EBADF (not a regular
// file) where the kernel has them. Older kernels answer EINVAL, or
// EOPNOTSUPP (6.1 hands the attach type to kprobe_multi), or refuse the
// program: any answer but EBADF or a permission error means no sessions.
func haveUprobeSession() error {
	if err := features.HaveBPFLinkUprobeMulti(); err != nil {
		return err
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "probe_ups_link",
		Type:         ebpf.Kprobe,
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
		AttachType:   ebpf.AttachType(attachTraceUprobeSession),
		License:      "MIT",
	})
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return err
	case err != nil:
		return ebpf.ErrNotSupported
	}
	defer prog.Close()
	l, err := linkCreateSession(prog, "/", []uint64{0}, []uint64{0}, 0)
	switch {
	case errors.Is(err, unix.EBADF):
		return nil
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return err
	case err != nil:
		return ebpf.ErrNotSupported
	}
	l.Close()
	return errors.New("a uprobe session link on / was created")
}

// attachSession places one file's probes in sampled mode where the kernel
// has sessions: one session link for the functions with a return (the
// skippable ones return early when not sampled) and one entry link for
// the others (free, munmap, marks).
func (t *Objects) attachSession(made *Attachment, ex *link.Executable, path string, pid int, probes []Placement) error {
	var entry, jvm link.UprobeMultiOptions
	var sessOffsets, sessCookies []uint64
	var entryKeys, sessKeys, jvmKeys []string
	entry.PID, jvm.PID = uint32(pid), uint32(pid)
	for _, p := range probes {
		addr := p.Offset + uint64(p.Skip)
		if p.CategoryArg != 0 {
			addProbe(&jvm, &jvmKeys, p)
			continue
		}
		if needsReturn(p) {
			sessOffsets = append(sessOffsets, addr)
			sessCookies = append(sessCookies, sessionCookie(p))
			sessKeys = append(sessKeys, placedKey(p))
			continue
		}
		addProbe(&entry, &entryKeys, p)
	}
	first := probes[0].Probe
	if err := t.attachJVM(made, ex, pid, &jvm, jvmKeys, first); err != nil {
		return err
	}
	if len(sessOffsets) > 0 {
		l, err := linkCreateSession(t.session, path, sessOffsets, sessCookies, uint32(pid))
		if err != nil {
			return attachError("session probes", first, pid, err)
		}
		// Kept with the return links: removed after the entry links.
		made.add(&made.returns, l, sessKeys)
	}
	if len(entry.Addresses) > 0 {
		l, err := ex.UprobeMulti(nil, t.objs.Entry, &entry)
		if err != nil {
			return attachError("entry probes", first, pid, err)
		}
		made.add(&made.entries, l, entryKeys)
	}
	return nil
}
