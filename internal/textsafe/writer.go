package textsafe

import (
	"io"
	"sync"
)

// Writer passes text through to W with any control character left in it
// escaped: C0 controls other than newline and tab as \xNN, DEL and C1
// controls (in their UTF-8 form) as \uNNNN. It is the last line of defence
// behind the writers that escape each field with String (which also keeps
// columns aligned): a name that reached the text unescaped still cannot
// drive the terminal. Printable text, newlines and tabs pass unchanged;
// NDJSON stays valid and means the same (its encoder escapes C0 itself,
// and \u escapes of DEL and C1 are JSON's own).
type Writer struct {
	W  io.Writer
	mu sync.Mutex // reports and log records may be written from several goroutines
	// lead is a 0xc2 held back from the end of the last write: the next
	// byte decides whether it opens a C1 control.
	lead bool
	buf  []byte
}

// NewWriter returns a Writer writing to w.
func NewWriter(w io.Writer) *Writer { return &Writer{W: w} }

// Write writes p, escaped, and reports len(p) on success.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.lead && clean(p) {
		return w.W.Write(p)
	}
	b := w.buf[:0] // reused: most writes are whole reports
	if w.lead {
		b = append(b, 0xc2)
		w.lead = false
	}
	b = append(b, p...)
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '\n' || c == '\t':
			out = append(out, c)
		case c < 0x20:
			out = appendByte(out, c)
		case c == 0x7f:
			// As \u007f, not \x7f: encoding/json leaves DEL (and C1) raw
			// in its strings, and this keeps NDJSON valid JSON, the same
			// string.
			out = appendRune(out, 0x7f)
		case c == 0xc2 && i+1 == len(b):
			w.lead = true
		case c == 0xc2 && b[i+1] >= 0x80 && b[i+1] < 0xa0:
			out = appendRune(out, rune(b[i+1]))
			i++
		default:
			out = append(out, c)
		}
	}
	w.buf = b
	if _, err := w.W.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes a byte held back at the end of the last write.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.lead {
		return nil
	}
	w.lead = false
	_, err := w.W.Write([]byte{0xc2})
	return err
}

// clean reports whether p holds no byte Write would rewrite or hold.
func clean(p []byte) bool {
	for i, c := range p {
		if (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f {
			return false
		}
		if c == 0xc2 && (i+1 == len(p) || (p[i+1] >= 0x80 && p[i+1] < 0xa0)) {
			return false
		}
	}
	return true
}
