package leakcheck

import (
	"bytes"
	"errors"
	"testing"
)

// TestDoesNotApply: a check that does not apply survives a recording's
// text, is not a --fail-on-leak failure, and says so on stderr; any other
// error fails.
func TestDoesNotApply(t *testing.T) {
	tests := []struct {
		text       string
		applies    bool
		failed     bool
		stderrLine string
	}{
		{"does not apply to a Go program: x", false, false, "memtrace: pid 7 p: leak check does not apply to a Go program: x\n"},
		{"no allocator was probed", true, true, "memtrace: pid 7 p: leak check failed: no allocator was probed\n"},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			err := VerdictError(tt.text)
			if err.Error() != tt.text || errors.Is(err, ErrDoesNotApply) == tt.applies {
				t.Fatalf("VerdictError(%q) = %v (does not apply: %v)", tt.text, err, errors.Is(err, ErrDoesNotApply))
			}
			j := NewJudge(Settings{FailOnLeak: true})
			j.Judge(&Verdict{PID: 7, Comm: "p", Err: err}, nil, nil)
			var stderr bytes.Buffer
			over, failed := j.Failures(&stderr)
			if over || failed != tt.failed || stderr.String() != tt.stderrLine {
				t.Errorf("over %v failed %v stderr %q; want false, %v, %q", over, failed, stderr.String(), tt.failed, tt.stderrLine)
			}
		})
	}
	if VerdictError("") != nil {
		t.Error(`VerdictError("") is not nil`)
	}
}
