package tracer

import (
	"testing"
	"unsafe"

	"github.com/cilium/ebpf/btf"
)

// TestRecordLayout checks the Go records the drainer casts ring-buffer bytes
// to against the compiled object's BTF: a field added on one side only would
// otherwise shift every figure silently.
func TestRecordLayout(t *testing.T) {
	spec, err := loadMemtrace()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		size uintptr
	}{
		{"event", unsafe.Sizeof(memtraceEvent{})},
		{"code_event", unsafe.Sizeof(memtraceCodeEvent{})},
		{"unwind_row", unsafe.Sizeof(memtraceUnwindRow{})},
		{"file_key", unsafe.Sizeof(memtraceFileKey{})},
		{"unwind_file", unsafe.Sizeof(memtraceUnwindFile{})},
	}
	for _, tt := range tests {
		var st *btf.Struct
		if err := spec.Types.TypeByName(tt.name, &st); err != nil {
			t.Fatalf("struct %s not in the object's BTF: %v", tt.name, err)
		}
		if uintptr(st.Size) != tt.size {
			t.Errorf("struct %s: C has %d bytes, Go %d", tt.name, st.Size, tt.size)
		}
	}
	// The ring record must stay small: every byte is copied per event.
	if s := unsafe.Sizeof(memtraceEvent{}); s != 72 {
		t.Errorf("struct event is %d bytes, want 72", s)
	}
}
