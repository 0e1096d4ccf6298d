package tracer

import (
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/memtrace/memtrace/internal/python"
)

// PythonStacks merges the Python frames the probes read into an event's
// call site and stack (python.Stacks).
type PythonStacks interface {
	// Batch starts a batch of events: a code object met again in it is
	// checked once against its process (freed code objects' addresses
	// are reused).
	Batch()
	Merge(pid uint32, callSite uint64, native, py []uint64, out []uint64) (uint64, []uint64)
	// CodeFreed tells that pid freed its code object at code, after
	// every event that ran it.
	CodeFreed(pid uint32, code uint64)
}

// SetPythonStacks has the drainer merge Python frames with m.
func (t *Objects) SetPythonStacks(m PythonStacks) { t.python = m }

// TracePython has the probes read pid's Python frames (bpf/python.h),
// wherever they take a stack or charge a call site. keepTags: the
// interpreter's code_dealloc is probed for pid (Attachment.FreesCode), so
// each code object's tag is read once and kept until it is freed;
// otherwise every frame reads it.
func (t *Objects) TracePython(pid uint32, l *python.Layout, keepTags bool) error {
	p := memtracePyProc{
		TssKey: l.TSSKey, TsdOff: l.TSDOffset(), TstateFrame: l.TstateFrame, CframeFrame: l.CFrameFrame,
		CodeOff: l.Frame.Code, PrevOff: l.Frame.Prev, InstrOff: l.Frame.Instr, EntryOff: l.Frame.Entry,
	}
	if l.Tagged() {
		p.NamesOff = l.Code.Filename
		if keepTags {
			// A new generation each time: a PID reused, or an exec,
			// never meets the tags kept before.
			p.Gen = t.pyGen.Add(1)
			if l.NameTagged() {
				// Read once per code object: co_name's characters too.
				p.AsciiOff, p.CompactOff = l.Code.ASCIIData, l.Code.CompactData
			}
		}
	}
	if err := t.objs.PyProcs.Update(pid, &p, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("trace python frames of %d: %w", pid, err)
	}
	return nil
}

// UntracePython stops reading pid's Python frames (its PID may be reused).
func (t *Objects) UntracePython(pid uint32) { _ = t.objs.PyProcs.Delete(pid) }
