package symbolize

import "github.com/ianlancetaylor/demangle"

// demangleName turns a C++ or Rust symbol into its source form and leaves
// other names alone. Names come from files we do not trust, so the output
// length is bounded and a panic in the demangler only costs the pretty name.
func demangleName(name string) (out string) {
	if len(name) < 2 || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R') {
		return name // plain C: skip the demangler's own checks
	}
	defer func() {
		if recover() != nil {
			out = name
		}
	}()
	return demangle.Filter(name, demangle.MaxLength(12))
}
