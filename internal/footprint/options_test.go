package footprint

import "testing"

// TestOptionsFor: glibc's libc.so is recognized by its headers, another
// allocator not; an unknown one is detected from the process's files.
func TestOptionsFor(t *testing.T) {
	r := []Range{{Start: 0x1000, End: 0x2000}}
	for _, c := range []struct {
		malloc        string
		glibc, detect bool
	}{
		{"/usr/lib/x86_64-linux-gnu/libc.so.6", true, false},
		{"libjemalloc.so.2", false, false},
		{"", false, true},
	} {
		o := OptionsFor(c.malloc, r)
		if o.Glibc != c.glibc || o.Detect != c.detect || len(o.Ranges) != 1 {
			t.Errorf("%q: %+v, want glibc %v detect %v", c.malloc, o, c.glibc, c.detect)
		}
	}
}
