package symbolize

import "testing"

// TestExecveSite: the probes' pc for execve's own writes resolves to its
// name in any process, known or not, as a call site and as a stack's
// exact first frame (one past it); its neighbours do not.
func TestExecveSite(t *testing.T) {
	r := NewResolver()
	for _, tt := range []struct {
		ret  uint64
		want string
	}{
		{ExecveSite, ExecveFunction},
		{ExecveSite + 1, ExecveFunction},
		{ExecveSite + 2, ""},
		{0, ""},
	} {
		f := r.Resolve(1<<22, tt.ret) // no such process
		if f.Function != tt.want || (tt.want != "" && f.Module != ExecveModule) {
			t.Errorf("Resolve(%#x) = %q in %q, want %q", tt.ret, f.Function, f.Module, tt.want)
		}
	}
}
