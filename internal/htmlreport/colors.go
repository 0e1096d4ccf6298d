package htmlreport

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"
)

// DefaultPalette colours the top call sites, largest first; the rest are
// OtherColor. (Tableau 10: distinct for most colour-blind readers.)
var DefaultPalette = []string{
	"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
	"#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#86bcb6",
}

// OtherColor is the colour of call sites outside the legend.
const OtherColor = "#bab0ac"

// ColorRule gives the call sites matching Pattern a colour.
type ColorRule struct {
	// Pattern is a shell glob (path.Match) tried against the site's
	// function name and against its module's base name.
	Pattern string
	Color   string
}

func (r ColorRule) match(function, module string) bool {
	ok1, _ := path.Match(r.Pattern, function)
	ok2, _ := path.Match(r.Pattern, module)
	return ok1 || ok2
}

var colorSyntax = regexp.MustCompile(`^(#[0-9a-fA-F]{3}|#[0-9a-fA-F]{6}|[a-zA-Z]+)$`)

// ParseColors reads a colour spec (--colors): one rule per line, "PATTERN
// COLOR", where COLOR is #rgb, #rrggbb or a CSS colour name; blank lines
// and lines starting with # are skipped. The first rule that matches a
// call site wins.
func ParseColors(r io.Reader) ([]ColorRule, error) {
	var rules []ColorRule
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		i := strings.LastIndexAny(l, " \t")
		if i < 0 {
			return nil, fmt.Errorf("colors line %d: want PATTERN COLOR", n)
		}
		pat, col := strings.TrimSpace(l[:i]), l[i+1:]
		if _, err := path.Match(pat, ""); err != nil {
			return nil, fmt.Errorf("colors line %d: pattern %q: %w", n, pat, err)
		}
		if !colorSyntax.MatchString(col) {
			return nil, fmt.Errorf("colors line %d: %q is not a colour", n, col)
		}
		rules = append(rules, ColorRule{pat, col})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read colors: %w", err)
	}
	return rules, nil
}
