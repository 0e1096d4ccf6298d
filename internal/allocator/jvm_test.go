package allocator

import (
	"os"
	"strings"
	"testing"
)

// debianJVM is the launcher of Debian's openjdk-17-jdk-headless (CI installs it).
const debianJVM = "/usr/lib/jvm/java-17-openjdk-amd64/bin/java"

func needJVM(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(debianJVM); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but no JVM: %v", err)
		}
		t.Skip(err)
	}
}

func TestJVMProbes(t *testing.T) {
	needJVM(t)
	mods := JVMForCommand(debianJVM)
	if len(mods) != 1 || mods[0].Path != "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so" || !IsJVM(mods[0]) {
		t.Fatalf("JVMForCommand = %+v, want the server VM's libjvm.so", mods)
	}
	probes, names, err := JVMProbes(mods[0])
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range probes {
		got = append(got, p.Symbol+"/"+string(rune('0'+p.CategoryArg)))
		if p.Size == 0 || p.Offset == 0 || p.Func != 0 {
			t.Errorf("%s: offset %#x size %d func %d", p.Symbol, p.Offset, p.Size, p.Func)
		}
	}
	wantProbes := "_ZN2os6strdupEPKc8MEMFLAGS/2 _ZN2os16strdup_check_oomEPKc8MEMFLAGS/2 " +
		"_ZN2os6mallocEm8MEMFLAGS/2 _ZN2os6mallocEm8MEMFLAGSRK15NativeCallStack/2 " +
		"_ZN2os7reallocEPvm8MEMFLAGSRK15NativeCallStack/3 _ZN2os7reallocEPvm8MEMFLAGS/3"
	if strings.Join(got, " ") != wantProbes {
		t.Errorf("probes %v, want %s", got, wantProbes)
	}
	// What NMT prints for OpenJDK 17, in MEMFLAGS order.
	wantNames := []string{"Java Heap", "Class", "Thread", "Thread Stack", "Code", "GC", "Compiler",
		"JVMCI", "Internal", "Other", "Symbol", "Native Memory Tracking", "Shared class space",
		"Arena Chunk", "Test", "Tracing", "Logging", "Statistics", "Arguments", "Module", "Safepoint",
		"Synchronization", "Serviceability", "Metaspace", "String Deduplication", "Object Monitors", "Unknown"}
	if strings.Join(names, "|") != strings.Join(wantNames, "|") {
		t.Errorf("names = %q\nwant %q", names, wantNames)
	}
	if JVMForCommand("/bin/sh") != nil {
		t.Error("a shell is no java launcher")
	}
	if _, _, err := JVMProbes(Module{Path: "/bin/true", Module: "/bin/true"}); err == nil || !strings.Contains(err.Error(), "/bin/true") {
		t.Errorf("JVMProbes(/bin/true) err = %v", err)
	}
}
