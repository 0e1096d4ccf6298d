package unwind

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The oracle: binutils' own CFI interpreter. `readelf --debug-dump=frames-interp`
// prints, per FDE, the CFA rule and the register rules at every location
// where they change; `--debug-dump=frames` prints the raw instructions, from
// which the tests take the text of CFA expressions (shown as "exp" in the
// interpreted dump) and the CIE augmentations.

// oracleFDE is one FDE as readelf interprets it.
type oracleFDE struct {
	section    string
	off        string // entry offset, as readelf prints it
	cie        string
	start, end uint64
	rows       []oracleRow
	cfaExprs   []string // distinct DW_CFA_def_cfa_expression texts in the FDE and its CIE
	rbpExprs   []string // distinct DW_CFA_expression r6 texts
	ripExprs   []string // distinct DW_CFA_expression r16 texts
}

// oracleRow is one line of the interpreted table.
type oracleRow struct {
	loc   uint64
	cfa   string // "rsp+8", "rbp+16", "r10+0", "exp"
	rbp   string // "", "u", "c-16", "exp", ...
	ra    string
	hasRA bool
}

type oracleCIE struct {
	aug      string
	rows     []oracleRow
	cfaExprs []string
	rbpExprs []string
	ripExprs []string
}

type oracle struct {
	fdes []oracleFDE
	cies map[string]*oracleCIE // by section + offset
}

var (
	reCIE     = regexp.MustCompile(`^([0-9a-f]+) [0-9a-f]+ [0-9a-f]+ CIE "([^"]*)"`)
	reRawCIE  = regexp.MustCompile(`^([0-9a-f]+) [0-9a-f]+ [0-9a-f]+ CIE$`)
	reFDE     = regexp.MustCompile(`^([0-9a-f]+) [0-9a-f]+ [0-9a-f]+ FDE cie=([0-9a-f]+) pc=([0-9a-f]+)\.\.([0-9a-f]+)`)
	reSect    = regexp.MustCompile(`^Contents of the (\S+) section`)
	reAug     = regexp.MustCompile(`^\s+Augmentation:\s+"([^"]*)"`)
	reCFAExpr = regexp.MustCompile(`DW_CFA_def_cfa_expression \((.*)\)$`)
	reRBPExpr = regexp.MustCompile(`DW_CFA_expression: r6 \(rbp\) \((.*)\)$`)
	reRIPExpr = regexp.MustCompile(`DW_CFA_expression: r16 \(rip\) \((.*)\)$`)
)

func readelfOut(t testing.TB, mode, file string) string {
	t.Helper()
	cmd := exec.Command("readelf", "--debug-dump=no-follow-links", "--debug-dump="+mode, file)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	// A separate debug file has no .interp contents: readelf says so and
	// exits 1, with the frames dumped all the same.
	harmless := strings.TrimSpace(strings.ReplaceAll(stderr.String(), "readelf: Error: Unable to find program interpreter name", "")) == ""
	if err != nil && !(harmless && len(out) > 0) {
		t.Fatalf("readelf --debug-dump=%s %s: %v\n%s", mode, file, err, stderr.String())
	}
	return string(out)
}

func parseHex(t testing.TB, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return v
}

func addUnique(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// loadOracle runs readelf on file twice and joins the two dumps.
func loadOracle(t testing.TB, file string) *oracle {
	t.Helper()
	o := &oracle{cies: map[string]*oracleCIE{}}
	type exprs struct{ cfa, rbp, rip []string }
	raw := map[string]*exprs{} // section+offset -> expressions
	augs := map[string]string{}
	sect, curKey := "", ""
	var cur *exprs
	sc := bufio.NewScanner(strings.NewReader(readelfOut(t, "frames", file)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "  DW_CFA_") && !strings.Contains(line, "expression") {
			continue // most lines: nothing the oracle needs
		}
		if m := reSect.FindStringSubmatch(line); m != nil {
			sect = m[1]
			continue
		}
		m := reRawCIE.FindStringSubmatch(line)
		if m == nil {
			m = reFDE.FindStringSubmatch(line)
		}
		if m != nil {
			cur, curKey = &exprs{}, sect+m[1]
			raw[curKey] = cur
			continue
		}
		if m := reAug.FindStringSubmatch(line); m != nil {
			augs[curKey] = m[1]
			continue
		}
		if cur == nil {
			continue
		}
		if m := reCFAExpr.FindStringSubmatch(line); m != nil {
			cur.cfa = addUnique(cur.cfa, m[1])
		}
		if m := reRBPExpr.FindStringSubmatch(line); m != nil {
			cur.rbp = addUnique(cur.rbp, m[1])
		}
		if m := reRIPExpr.FindStringSubmatch(line); m != nil {
			cur.rip = addUnique(cur.rip, m[1])
		}
	}

	sect = ""
	var ncols, rbpCol, raCol int
	var rows *[]oracleRow
	addRow := func(line string) {
		// A register rule "in another register" reads "r9 (r9)": one field.
		fields := strings.Fields(strings.ReplaceAll(line, " (", "("))
		if rows == nil || len(fields) != ncols+2 {
			t.Fatalf("readelf row %q: %d fields, want %d", line, len(fields), ncols+2)
		}
		r := oracleRow{loc: parseHex(t, fields[0]), cfa: fields[1]}
		if rbpCol >= 0 {
			r.rbp = fields[2+rbpCol]
		}
		if raCol >= 0 {
			r.ra, r.hasRA = fields[2+raCol], true
		}
		if n := len(*rows); n > 0 && (*rows)[n-1].loc == r.loc {
			(*rows)[n-1] = r
		} else {
			*rows = append(*rows, r)
		}
	}
	sc = bufio.NewScanner(strings.NewReader(readelfOut(t, "frames-interp", file)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		// Table rows (most lines) start with a 16-digit location; entry
		// headers with an 8-digit offset.
		if len(line) > 17 && line[16] == ' ' && line[8] != ' ' {
			addRow(line)
			continue
		}
		if m := reSect.FindStringSubmatch(line); m != nil {
			sect = m[1]
			rows = nil
			continue
		}
		if m := reCIE.FindStringSubmatch(line); m != nil {
			c := &oracleCIE{aug: m[2]}
			if e := raw[sect+m[1]]; e != nil {
				c.cfaExprs, c.rbpExprs, c.ripExprs = e.cfa, e.rbp, e.rip
			}
			if a, ok := augs[sect+m[1]]; ok && a != c.aug {
				t.Fatalf("CIE %s: augmentation %q in one dump, %q in the other", m[1], a, c.aug)
			}
			o.cies[sect+m[1]] = c
			rows = &c.rows
			continue
		}
		if m := reFDE.FindStringSubmatch(line); m != nil {
			f := oracleFDE{section: sect, off: m[1], cie: m[2], start: parseHex(t, m[3]), end: parseHex(t, m[4])}
			if e := raw[sect+m[1]]; e != nil {
				f.cfaExprs, f.rbpExprs, f.ripExprs = e.cfa, e.rbp, e.rip
			}
			o.fdes = append(o.fdes, f)
			rows = &o.fdes[len(o.fdes)-1].rows
			continue
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			// A blank line ends an entry's table.
			rows = nil
			continue
		}
		if len(fields) >= 2 && fields[0] == "LOC" && fields[1] == "CFA" {
			ncols, rbpCol, raCol = len(fields)-2, -1, -1
			for i, c := range fields[2:] {
				switch c {
				case "rbp":
					rbpCol = i
				case "ra":
					raCol = i
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(o.fdes) == 0 {
		t.Fatalf("readelf shows no FDE in %s", file)
	}
	return o
}

var reCFAReg = regexp.MustCompile(`^([a-z0-9]+)([+-]\d+)$`)
var reDerefRBP = regexp.MustCompile(`^DW_OP_breg6 \(rbp\): (-?\d+); DW_OP_deref$`)
var rePLT = regexp.MustCompile(`^DW_OP_breg7 \(rsp\): 8; DW_OP_breg16 \(rip\): 0; DW_OP_lit15; DW_OP_and; DW_OP_lit(\d+); DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus$`)

// want is the row this package must produce for one readelf row. It
// returns ok=false where readelf's text does not determine the answer (an
// FDE with several different CFA expressions).
func (o *oracle) want(t testing.TB, f *oracleFDE, c *oracleCIE, r oracleRow) (Row, bool) {
	t.Helper()
	undefined := Row{PC: r.loc}
	exprs := func(own, cie []string) ([]string, bool) {
		all := append(append([]string(nil), own...), cie...)
		uniq := []string{}
		for _, e := range all {
			uniq = addUnique(uniq, e)
		}
		return uniq, len(uniq) == 1
	}
	if strings.Contains(c.aug, "S") {
		// Signal trampolines: only glibc's layout of the ucontext.
		cfa, one1 := exprs(f.cfaExprs, c.cfaExprs)
		rbp, one2 := exprs(f.rbpExprs, c.rbpExprs)
		rip, one3 := exprs(f.ripExprs, c.ripExprs)
		if r.cfa == "exp" && r.rbp == "exp" && r.ra == "exp" && one1 && one2 && one3 &&
			cfa[0] == "DW_OP_breg7 (rsp): 160; DW_OP_deref" && rbp[0] == "DW_OP_breg7 (rsp): 120" && rip[0] == "DW_OP_breg7 (rsp): 168" {
			return Row{PC: r.loc, Kind: KindSignal}, true
		}
		return undefined, true
	}
	ra := r.ra
	if !r.hasRA {
		// The return-address column is named after its register; for
		// x86-64 CIEs readelf calls column 16 "ra".
		return undefined, true
	}
	if ra == "u" {
		return Row{PC: r.loc, Kind: KindEnd}, true
	}
	if ra != "c-8" {
		return undefined, true
	}
	rbp := r.rbp
	row := Row{PC: r.loc}
	if r.cfa == "exp" {
		list, one := exprs(f.cfaExprs, c.cfaExprs)
		if !one {
			return Row{}, false
		}
		if m := rePLT.FindStringSubmatch(list[0]); m != nil {
			if rbp != "" && rbp != "u" && rbp != "s" {
				return undefined, true
			}
			n, _ := strconv.Atoi(m[1])
			return Row{PC: r.loc, Kind: KindPLT, CFAOffset: int32(n)}, true
		}
		if m := reDerefRBP.FindStringSubmatch(list[0]); m != nil {
			n, _ := strconv.Atoi(m[1])
			rl, one := exprs(f.rbpExprs, c.rbpExprs)
			if rbp != "exp" || !one || rl[0] != "DW_OP_breg6 (rbp): 0" || n < math.MinInt16 || n > math.MaxInt16 {
				return undefined, true
			}
			return Row{PC: r.loc, Kind: KindDerefRBP, CFAOffset: int32(n)}, true
		}
		return undefined, true
	}
	m := reCFAReg.FindStringSubmatch(r.cfa)
	if m == nil {
		t.Fatalf("FDE %s: unexpected CFA %q", f.off, r.cfa)
	}
	off, _ := strconv.Atoi(m[2])
	switch m[1] {
	case "rsp":
		row.Kind = KindRSP
	case "rbp":
		row.Kind = KindRBP
	default:
		return undefined, true
	}
	if off < math.MinInt16 || off > math.MaxInt16 {
		return undefined, true
	}
	row.CFAOffset = int32(off)
	switch {
	case rbp == "" || rbp == "u" || rbp == "s":
	case strings.HasPrefix(rbp, "c"):
		n, err := strconv.Atoi(rbp[1:])
		if err != nil {
			t.Fatalf("FDE %s: rbp rule %q", f.off, rbp)
		}
		if n%8 != 0 || n/8 < math.MinInt8 || n/8 > math.MaxInt8 {
			return undefined, true
		}
		row.RBPSaved, row.RBPOffset = true, int32(n)
	default:
		return undefined, true
	}
	return row, true
}

// table is the table readelf's rows imply: every FDE's rows within its
// range (its CIE's rows where the FDE has no instructions), a
// KindUndefined row where an FDE ends and none starts, identical neighbours
// merged. unknown holds the PCs whose row readelf's text does not decide.
func (o *oracle) table(t testing.TB) (rows []Row, unknown map[uint64]bool) {
	t.Helper()
	unknown = map[uint64]bool{}
	var fdes []*oracleFDE
	inEH := func(pc uint64) bool {
		for _, f := range o.fdes {
			if f.section == ".eh_frame" && f.start <= pc && pc < f.end {
				return true
			}
		}
		return false
	}
	for i := range o.fdes {
		f := &o.fdes[i]
		if f.end > f.start && (f.section == ".eh_frame" || !inEH(f.start)) {
			fdes = append(fdes, f)
		}
	}
	sort.SliceStable(fdes, func(i, j int) bool { return fdes[i].start < fdes[j].start })
	for i, f := range fdes {
		if i > 0 && fdes[i-1].end > f.start {
			t.Fatalf("FDEs %s and %s overlap: the oracle does not model overlaps", fdes[i-1].off, f.off)
		}
		c := o.cies[f.section+f.cie]
		if c == nil {
			t.Fatalf("FDE %s: no CIE %s", f.off, f.cie)
		}
		src := f.rows
		if len(src) == 0 {
			if len(c.rows) == 0 {
				t.Fatalf("FDE %s: neither FDE nor CIE %s has rows", f.off, f.cie)
			}
			last := c.rows[len(c.rows)-1]
			last.loc = f.start
			src = []oracleRow{last}
		}
		if src[0].loc != f.start {
			t.Fatalf("FDE %s: first row at %#x, FDE starts at %#x", f.off, src[0].loc, f.start)
		}
		for _, r := range src {
			if r.loc >= f.end {
				break
			}
			w, ok := o.want(t, f, c, r)
			if !ok {
				unknown[r.loc] = true
				w = Row{PC: r.loc, Kind: Kind(255)}
			}
			rows = append(rows, w)
		}
		if i+1 == len(fdes) || fdes[i+1].start != f.end {
			rows = append(rows, Row{PC: f.end})
		}
	}
	merged := rows[:0]
	for _, r := range rows {
		if n := len(merged); n > 0 && sameRule(merged[n-1], r) {
			continue
		}
		merged = append(merged, r)
	}
	return merged, unknown
}

// checkAgainstReadelf compares tab with readelf's interpretation of file
// row by row (.eh_frame, and .debug_frame FDEs that start outside every
// .eh_frame FDE), and returns how many rows of each kind the file has.
func checkAgainstReadelf(t *testing.T, file string, tab *Table) map[Kind]int {
	t.Helper()
	o := loadOracle(t, file)
	want, unknown := o.table(t)
	if len(unknown) > 0 {
		t.Errorf("%s: %d rows with several CFA expressions in one FDE: not checked", file, len(unknown))
	}
	got := tab.Rows
	kinds := map[Kind]int{}
	for _, r := range got {
		kinds[r.Kind]++
	}
	// Per location readelf prints: Lookup must give readelf's rule.
	bad := 0
	for _, w := range want {
		g, ok := tab.Lookup(w.PC)
		if unknown[w.PC] {
			continue
		}
		if !ok || !sameRule(g, w) {
			if bad++; bad <= 10 {
				t.Errorf("%s: at %#x got %v (ok=%v), readelf says %v", file, w.PC, g, ok, w)
			}
		}
	}
	// And the whole table, row for row.
	if len(got) != len(want) {
		t.Errorf("%s: %d rows, readelf implies %d", file, len(got), len(want))
	}
	for i := 0; i < len(got) && i < len(want); i++ {
		if unknown[want[i].PC] {
			continue
		}
		if got[i] != want[i] {
			if bad++; bad <= 10 {
				t.Errorf("%s: row %d is %v, readelf implies %v", file, i, got[i], want[i])
			}
			break
		}
	}
	if bad > 10 {
		t.Errorf("%s: %d mismatches in all", file, bad)
	}
	return kinds
}

func kindsString(k map[Kind]int) string {
	var b bytes.Buffer
	for kind := KindUndefined; kind <= KindEnd; kind++ {
		fmt.Fprintf(&b, " %s=%d", kind, k[kind])
	}
	return b.String()
}
