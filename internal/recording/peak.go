package recording

import (
	"encoding/binary"
	"io"
	"os"
)

// Peak says which moment `memtrace replay --at peak` shows: the kept peak
// snapshot of the process with the largest heap peak when the run ended,
// which was its Snapshots-th, taken at Time. The writer puts it after the
// zstd stream, in a skippable frame (every zstd decoder skips it: the
// format and its version are unchanged), so that a replay reads it
// first, from the file's end, and reads the records once.
type Peak struct {
	PID       uint32
	Snapshots uint64
	Time      uint64
}

const (
	// peakFrameMagic is one of zstd's skippable frame magic numbers
	// (0x184D2A50 to 0x184D2A5F).
	peakFrameMagic = 0x184D2A5E
	peakTag        = "MTPEAK01"
	peakPayload    = len(peakTag) + 4 + 8 + 8
	peakFrameLen   = 8 + peakPayload
)

// SetPeak gives the recording its peak hint, written by Close.
func (w *Writer) SetPeak(p Peak) { w.peak = &p }

func appendPeakFrame(b []byte, p Peak) []byte {
	b = binary.LittleEndian.AppendUint32(b, peakFrameMagic)
	b = binary.LittleEndian.AppendUint32(b, uint32(peakPayload))
	b = append(b, peakTag...)
	b = binary.LittleEndian.AppendUint32(b, p.PID)
	b = binary.LittleEndian.AppendUint64(b, p.Snapshots)
	return binary.LittleEndian.AppendUint64(b, p.Time)
}

// ReadPeak reads the peak hint at the end of the recording at path. ok is
// false when there is none: a recording whose run was killed (truncated),
// one that saw no allocation, or one written before the hint existed.
func ReadPeak(path string) (p Peak, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return Peak{}, false
	}
	defer f.Close()
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil || end < int64(headerLen+peakFrameLen) {
		return Peak{}, false
	}
	b := make([]byte, peakFrameLen)
	if _, err := f.ReadAt(b, end-int64(peakFrameLen)); err != nil {
		return Peak{}, false
	}
	if binary.LittleEndian.Uint32(b) != peakFrameMagic || binary.LittleEndian.Uint32(b[4:]) != uint32(peakPayload) ||
		string(b[8:8+len(peakTag)]) != peakTag {
		return Peak{}, false
	}
	b = b[8+len(peakTag):]
	return Peak{PID: binary.LittleEndian.Uint32(b), Snapshots: binary.LittleEndian.Uint64(b[4:]),
		Time: binary.LittleEndian.Uint64(b[12:])}, true
}
