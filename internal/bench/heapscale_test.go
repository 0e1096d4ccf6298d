package bench

import (
	"testing"
)

func TestHeapscaleParsers(t *testing.T) {
	vg := "==00:00:00:00.000 7346== Command: ./hold\n" +
		"==00:00:00:13.641 7346== HEAP SUMMARY:\n" +
		"==00:00:00:13.641 7346==     in use at exit: 240,000,000 bytes in 5,000,000 blocks\n" +
		"==00:00:01:20.503 7346== ERROR SUMMARY: 1 errors from 1 contexts (suppressed: 0 from 0)\n"
	if got, err := valgrindLeakTime(output{stderr: vg}, nil); err != nil || got < 66.861 || got > 66.863 {
		t.Errorf("valgrindLeakTime = %v, %v; want 66.862 s", got, err)
	}
	if _, err := valgrindLeakTime(output{stderr: "==00:00:00:00.000 1== Command: x\n"}, nil); err == nil {
		t.Error("valgrindLeakTime without a HEAP SUMMARY: no error")
	}
	mt := `level=INFO msg="leak check done" pid=27834 took=7.593020472s cpu=1.77638s` + "\n" +
		`level=INFO msg="memtrace memory" peak_rss_bytes=372191232 rss_bytes=360546304` + "\n"
	wall, cpu, err := leakCheckTimes(output{stderr: mt}, nil)
	if err != nil || wall != 7.593020472 || cpu != 1.77638 {
		t.Errorf("leakCheckTimes = %v, %v, %v", wall, cpu, err)
	}
	if peak, err := peakRSS(output{stderr: mt}, nil); err != nil || peak != 372191232 {
		t.Errorf("peakRSS = %v, %v", peak, err)
	}
}
