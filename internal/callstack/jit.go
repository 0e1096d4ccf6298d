package callstack

import "github.com/memtrace/memtrace/internal/event"

// JITCharge picks, among frames (a charged JIT frame's return address,
// then its callers'), the frame to charge: the first that a runtime's map
// names as a JIT function of the program's own, passing the runtime's own
// code on the way (runtime: its JIT functions and its native glue between
// them, such as V8's Builtins_*). ok is false when none is found before a
// frame that is neither (a native caller, unnamed code): the charge then
// stays where the probes put it. unnamed says the search stopped at code
// no file and no map names yet (a JVM's map not yet written).
func JITCharge(c Code, pid int, frames []uint64, runtime func(fn string, jit bool) bool) (ret uint64, ok, unnamed bool) {
	for _, raw := range frames {
		if raw&event.FrameExact != 0 {
			return 0, false, false
		}
		f := c.Resolve(pid, raw)
		switch {
		case f.Function == "":
			return 0, false, f.Module == "" // anonymous code: JIT code not in a map (yet)
		case runtime(f.Function, f.JIT):
			continue
		case f.JIT:
			return raw, true, false
		default:
			return 0, false, false
		}
	}
	return 0, false, false
}
