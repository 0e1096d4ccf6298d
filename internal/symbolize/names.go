package symbolize

import "strings"

// NameDetail says how much of a demangled C++ or Rust name to keep.
type NameDetail int

const (
	// FullName keeps the name as demangled.
	FullName NameDetail = iota
	// NoTemplateArgs replaces template (generic) arguments by "<…>".
	NoTemplateArgs
	// NoTemplateArgsOrParams also replaces parameter lists by "(…)".
	NoTemplateArgsOrParams
)

// ShortName shortens a demangled name for display:
// "std::vector<int, std::allocator<int> >::_M_realloc_insert<int const&>(__gnu_cxx::__normal_iterator<…>, int const&)"
// becomes "std::vector<…>::_M_realloc_insert<…>(int const&)" with
// NoTemplateArgs and "std::vector<…>::_M_realloc_insert<…>(…)" with
// NoTemplateArgsOrParams. Empty lists "()" and "(anonymous namespace)" stay,
// operators (operator<, operator<<, operator(), operator->) are kept whole,
// and a leading qualified path such as Rust's "<Vec<u8> as Drop>::drop" is
// kept (its arguments elided). C names pass unchanged. Reports keep the full
// name in JSON.
func ShortName(name string, d NameDetail) string {
	if d == FullName || !strings.ContainsAny(name, "<(") {
		return name
	}
	var b strings.Builder
	b.Grow(len(name))
	templ := false // the next '<' opens template arguments
	for i := 0; i < len(name); {
		c := name[i]
		switch {
		case c == 'o' && isOperatorAt(name, i):
			j := operatorEnd(name, i+len("operator"))
			b.WriteString(name[i:j])
			i = j
			if strings.HasPrefix(name[i:], " <") { // operator<< <char>(…)
				b.WriteByte(' ')
				i++
				templ = true
			}
		case c == '<' && (templ || i > 0 && isIdentByte(name[i-1])):
			templ = false
			j := closing(name, i)
			if j < 0 {
				b.WriteString(name[i:])
				return b.String()
			}
			if j == i+1 {
				b.WriteString("<>") // std::less<>: as short as it gets
			} else {
				b.WriteString("<…>")
			}
			i = j + 1
		case c == '(' && d == NoTemplateArgsOrParams:
			j := closing(name, i)
			if j < 0 {
				b.WriteString(name[i:])
				return b.String()
			}
			if in := name[i+1 : j]; in == "" || in == "anonymous namespace" {
				b.WriteString(name[i : j+1])
			} else {
				b.WriteString("(…)")
			}
			i = j + 1
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

func isIdentByte(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// isOperatorAt reports whether the word "operator" starts at i.
func isOperatorAt(s string, i int) bool {
	const op = "operator"
	if !strings.HasPrefix(s[i:], op) || i > 0 && isIdentByte(s[i-1]) {
		return false
	}
	return i+len(op) == len(s) || !isIdentByte(s[i+len(op)])
}

// operatorEnd returns the end of the operator symbol starting at j (after
// the word operator): "()" and "[]", or a run of operator characters.
func operatorEnd(s string, j int) int {
	if strings.HasPrefix(s[j:], "()") || strings.HasPrefix(s[j:], "[]") {
		return j + 2
	}
	for j < len(s) && strings.IndexByte("<>=!+-*/%^&|~,", s[j]) >= 0 {
		j++
	}
	return j
}

// closing returns the index of the bracket closing the one at i ('<' or
// '('), or -1. Parentheses nest inside template arguments and templates
// inside parameters; a '<' or '>' inside parentheses does not count for
// the template brackets (an expression argument such as (1>2)).
func closing(s string, i int) int {
	open, close := s[i], byte(')')
	if open == '<' {
		close = '>'
	}
	depth := 0
	for j := i; j < len(s); j++ {
		switch c := s[j]; {
		case c == 'o' && isOperatorAt(s, j):
			j = operatorEnd(s, j+len("operator")) - 1
		case c == '(' && open == '<':
			k := closing(s, j)
			if k < 0 {
				return -1
			}
			j = k
		case c == open:
			depth++
		case c == close:
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return -1
}
