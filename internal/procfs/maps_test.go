package procfs

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestParseMaps(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Mapping
	}{
		{
			name: "executable",
			in:   "55d0c8a00000-55d0c8a04000 r-xp 00002000 fe:00 247278                     /usr/bin/cat\n",
			want: []Mapping{{Start: 0x55d0c8a00000, End: 0x55d0c8a04000, Offset: 0x2000, Perms: "r-xp", Dev: "fe:00", Inode: 247278, Path: "/usr/bin/cat"}},
		},
		{
			name: "path with spaces",
			in:   "7f0000001000-7f0000002000 r-xp 00001000 08:01 42   /opt/my app/lib  two.so\n",
			want: []Mapping{{Start: 0x7f0000001000, End: 0x7f0000002000, Offset: 0x1000, Perms: "r-xp", Dev: "08:01", Inode: 42, Path: "/opt/my app/lib  two.so"}},
		},
		{
			name: "deleted",
			in:   "7f0000001000-7f0000003000 r-xp 00000000 103:02 1234 /tmp/old lib.so (deleted)\n",
			want: []Mapping{{Start: 0x7f0000001000, End: 0x7f0000003000, Perms: "r-xp", Dev: "103:02", Inode: 1234, Path: "/tmp/old lib.so", Deleted: true}},
		},
		{
			name: "pseudo and anonymous",
			in: "555555559000-55555557a000 rw-p 00000000 00:00 0                          [heap]\n" +
				"7f1234000000-7f1234021000 rw-p 00000000 00:00 0 \n" +
				"7f1234100000-7f1234101000 rwxp 00000000 00:00 0\n" +
				"7ffd1e7f1000-7ffd1e7f3000 r-xp 00000000 00:00 0                          [vdso]\n" +
				"\n" +
				"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]",
			want: []Mapping{
				{Start: 0x555555559000, End: 0x55555557a000, Perms: "rw-p", Dev: "00:00", Path: "[heap]"},
				{Start: 0x7f1234000000, End: 0x7f1234021000, Perms: "rw-p", Dev: "00:00"},
				{Start: 0x7f1234100000, End: 0x7f1234101000, Perms: "rwxp", Dev: "00:00"},
				{Start: 0x7ffd1e7f1000, End: 0x7ffd1e7f3000, Perms: "r-xp", Dev: "00:00", Path: "[vdso]"},
				{Start: 0xffffffffff600000, End: 0xffffffffff601000, Perms: "--xp", Dev: "00:00", Path: "[vsyscall]"},
			},
		},
		{
			name: "sorted by address",
			in: "7f0000003000-7f0000004000 rw-p 00000000 00:00 0\n" +
				"7f0000001000-7f0000002000 r--p 00000000 00:00 0 [stack]\n",
			want: []Mapping{
				{Start: 0x7f0000001000, End: 0x7f0000002000, Perms: "r--p", Dev: "00:00", Path: "[stack]"},
				{Start: 0x7f0000003000, End: 0x7f0000004000, Perms: "rw-p", Dev: "00:00"},
			},
		},
		{
			name: "shared anonymous memory",
			in:   "7f5000000000-7f5000001000 rw-s 00000000 00:01 99 /dev/zero (deleted)\n",
			want: []Mapping{{Start: 0x7f5000000000, End: 0x7f5000001000, Perms: "rw-s", Dev: "00:01", Inode: 99, Path: "/dev/zero", Deleted: true}},
		},
		{
			name: "empty",
			in:   "",
			want: nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMaps(strings.NewReader(tc.in))
			if err != nil {
				t.Fatalf("ParseMaps: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseMaps =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestParseMapsErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"no dash", "55d0c8a00000 r-xp 0 fe:00 1 /x\n", "parse maps line 1: address range \"55d0c8a00000\": no '-'"},
		{"bad start", "zz-10 r-xp 0 fe:00 1 /x\n", "parse maps line 1: start address: strconv.ParseUint: parsing \"zz\": invalid syntax"},
		{"reversed", "20-10 r-xp 0 fe:00 1 /x\n", "parse maps line 1: address range \"20-10\" ends before it starts"},
		{"short perms", "10-20 r-x 0 fe:00 1 /x\n", "parse maps line 1: permissions \"r-x\": want 4 characters"},
		{"bad offset", "10-20 r-xp 0x fe:00 1 /x\n", "parse maps line 1: offset: strconv.ParseUint: parsing \"0x\": invalid syntax"},
		{"bad device", "10-20 r-xp 0 fe00 1 /x\n", "parse maps line 1: device \"fe00\": want hex major:minor"},
		{"missing inode", "10-20 r-xp 0 fe:00\n", "parse maps line 1: missing inode"},
		{"bad inode", "10-20 r-xp 0 fe:00 1a /x\n", "parse maps line 1: inode: strconv.ParseUint: parsing \"1a\": invalid syntax"},
		{"second line", "10-20 r-xp 0 fe:00 1 /x\n\n30 r-xp\n", "parse maps line 3: address range \"30\": no '-'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMaps(strings.NewReader(tc.in))
			if err == nil {
				t.Fatalf("ParseMaps = %+v, want error %q", got, tc.want)
			}
			if err.Error() != tc.want {
				t.Errorf("ParseMaps error = %q, want %q", err, tc.want)
			}
		})
	}
}

// The parser must read the real thing: our own maps hold our executable.
func TestParseMapsSelf(t *testing.T) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	maps, err := ParseMaps(f)
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range maps {
		if m.Path == exe && m.Executable() && m.FileBacked() {
			return
		}
	}
	t.Errorf("no executable mapping of %s in %+v", exe, maps)
}
