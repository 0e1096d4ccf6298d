package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText prints every comparison as a table, with the same figures as
// the JSON.
func (res *Results) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "membench %s: kernel %s, %d CPUs, %s, load average %s at start, %s at end; %d round(s)%s\n",
		res.Started.Format("2006-01-02 15:04:05"), res.Host.Kernel, res.Host.CPUs, res.Host.GoVersion,
		res.Host.LoadStart, res.Host.LoadEnd, res.Config.Rounds, quickNote(res.Config.Quick))
	for _, c := range res.Comparisons {
		fmt.Fprintln(w)
		if err := c.writeText(w); err != nil {
			return err
		}
	}
	return nil
}

func quickNote(q bool) string {
	if q {
		return " (--quick: smoke run, figures are rough)"
	}
	return ""
}

// column is one optional column: shown when any row has a value.
type column struct {
	head string
	cell func(*Row) string
}

func (c *Comparison) writeText(w io.Writer) error {
	fmt.Fprintf(w, "== %s\n", c.Title)
	base := c.Baseline
	cols := []column{
		{"median " + c.Unit, func(r *Row) string { return num(r.Median) }},
		{"min..max", func(r *Row) string {
			if len(r.Rounds) < 2 {
				return ""
			}
			return num(r.Min) + ".." + num(r.Max)
		}},
		{"x " + base, func(r *Row) string { return optNum(r.Ratio, "%.2fx") }},
		{"overhead", func(r *Row) string { return optNum(r.Overhead, "") }},
		{"x floor", func(r *Row) string { return optNum(r.XFloor, "%.2fx") }},
		{"target", func(r *Row) string {
			if r.Met == nil {
				return r.Target
			}
			if *r.Met {
				return r.Target + " met"
			}
			return r.Target + " MISSED"
		}},
		{"lost events", func(r *Row) string {
			if r.Lost == nil {
				return ""
			}
			return fmt.Sprint(r.Lost)
		}},
		{"BPF ns/pair (runs/pair×ns/run)", func(r *Row) string { return bpfCell(r.BPF) }},
		{"memtrace CPU ns/event", func(r *Row) string { return optNum(r.ConsumerNsPerEvent, "%.0f") }},
	}
	var shown []column
	for _, col := range cols {
		for _, r := range c.Rows {
			if r.Status == StatusOK && col.cell(r) != "" {
				shown = append(shown, col)
				break
			}
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"variant"}
	for _, col := range shown {
		head = append(head, col.head)
	}
	fmt.Fprintln(tw, strings.Join(append(head, "note"), "\t"))
	for _, r := range c.Rows {
		cells := []string{r.Name}
		for _, col := range shown {
			v := "-"
			if r.Status == StatusOK {
				if s := col.cell(r); s != "" {
					v = s
				}
			}
			cells = append(cells, v)
		}
		note := r.Note
		if r.Status != StatusOK {
			note = r.Status + ": " + note
		}
		note = oneLine(note, 200)
		fmt.Fprintln(tw, strings.Join(append(cells, note), "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range c.Notes {
		fmt.Fprintf(w, "   %s\n", n)
	}
	return nil
}

// num prints a figure with the precision its size deserves.
func num(v float64) string {
	switch a := abs(v); {
	case a >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func optNum(v *float64, format string) string {
	if v == nil {
		return ""
	}
	if format == "" {
		return num(*v)
	}
	return fmt.Sprintf(format, *v)
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

// oneLine keeps a note on its row: whitespace runs become one space, and a
// long note (a tool's stderr) is cut; the JSON has it whole.
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}
