// Package textsafe makes strings that a traced process controls safe to
// print: its name, its executable's path, mark labels, symbol and file
// names. memtrace runs as root and its text goes to an operator's
// terminal, so such a string must not be able to send escape sequences
// (set the window title, clear the screen, write the clipboard), break a
// line or a column, or reorder the text around it.
package textsafe

import (
	"strconv"
	"unicode"
	"unicode/utf8"
)

// String returns s with every character that is not printable written as
// an escape, so that the result shows on one line, in as many columns as
// it has characters:
//
//   - tab, newline and carriage return as \t, \n, \r;
//   - the other C0 controls and DEL as \xNN;
//   - C1 controls, line and paragraph separators, bidirectional and other
//     format characters (invisible, or reordering what follows), and any
//     other rune unicode.IsGraphic rejects as \uNNNN (\UNNNNNNNN above the
//     BMP);
//   - a byte that is not part of valid UTF-8 as \xNN, so a broken name
//     shows as such rather than as U+FFFD.
//
// Backslashes are kept as they are: String is idempotent, so a writer may
// apply it to a label another has already escaped. The price is that a
// name spelled "\x1b" and one holding ESC look alike, which is harmless:
// neither reaches the terminal as a control.
func String(s string) string {
	i := firstUnsafe(s)
	if i == len(s) {
		return s
	}
	b := make([]byte, 0, len(s)+16)
	b = append(b, s[:i]...)
	for i < len(s) {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			b = append(b, c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b = appendByte(b, s[i])
		case r == '\t':
			b = append(b, `\t`...)
		case r == '\n':
			b = append(b, `\n`...)
		case r == '\r':
			b = append(b, `\r`...)
		case r < 0x20 || r == 0x7f:
			b = appendByte(b, byte(r))
		case !unicode.IsGraphic(r):
			b = appendRune(b, r)
		default:
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return string(b)
}

// Safe reports whether String would return s unchanged.
func Safe(s string) bool {
	return firstUnsafe(s) == len(s)
}

// firstUnsafe is the index of s's first byte String would rewrite, or
// len(s). Printable ASCII, the common case, is checked a byte at a time.
func firstUnsafe(s string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if c < 0x80 || (r == utf8.RuneError && n == 1) || !unicode.IsGraphic(r) {
			return i
		}
		i += n
	}
	return len(s)
}

const hexDigits = "0123456789abcdef"

func appendByte(b []byte, c byte) []byte {
	return append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&0xf])
}

func appendRune(b []byte, r rune) []byte {
	if r > 0xffff {
		b = append(b, `\U`...)
		return appendHex(b, uint32(r), 8)
	}
	b = append(b, `\u`...)
	return appendHex(b, uint32(r), 4)
}

func appendHex(b []byte, v uint32, digits int) []byte {
	s := strconv.FormatUint(uint64(v), 16)
	for range digits - len(s) {
		b = append(b, '0')
	}
	return append(b, s...)
}
