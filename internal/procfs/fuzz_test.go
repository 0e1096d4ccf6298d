package procfs

import (
	"strings"
	"testing"
)

func FuzzParseMaps(f *testing.F) {
	f.Add("")
	f.Add("10-20 r-xp 00000000 00:00 0 [vdso]\n")
	f.Fuzz(func(t *testing.T, in string) {
		maps, err := ParseMaps(strings.NewReader(in))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "parse maps line ") && !strings.HasPrefix(err.Error(), "read maps ") {
				t.Errorf("error without context: %v", err)
			}
			return
		}
		for _, m := range maps {
			if m.End < m.Start || len(m.Perms) != 4 || strings.HasSuffix(m.Path, deletedSuffix) && !m.Pseudo() {
				t.Errorf("bad mapping %+v", m)
			}
		}
	})
}
