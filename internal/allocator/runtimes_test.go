package allocator

import "testing"

func TestRuntimeJIT(t *testing.T) {
	tests := []struct {
		name    string
		runtime bool
	}{
		{"JS:*FastBuffer node:internal/buffer:960:14", true},
		{"JS:^alloc node:buffer:391:30", true},
		{"JS:*packFrames /work/app.js:8:20", false},
		{"JS:~ /work/app.js:1:1", false},
		{"JS:*node:fake /work/app.js:3:1", false}, // a program's function named so
		{"Builtin:ArrayBufferConstructor", true},
		{"BytecodeHandler:Ldar", true},
		{"Interpreter", true},
		{"StubRoutines (1)", true},
		{"java.nio.DirectByteBuffer::<init>", true},
		{"jdk.internal.misc.Unsafe::allocateMemory", true},
		{"Alloc::keep", false},
		{"long jdk.internal.misc.Unsafe.allocateMemory0(long)", true},
		{"java.nio.ByteBuffer java.nio.ByteBuffer.allocateDirect(int)", true},
		{"void java.nio.DirectByteBuffer.<init>(int)", true},
		{"int DirectKeeper.keep(int, int, boolean)", false},
		{"java.util.List com.example.Cache.fill(java.lang.String)", false},
		{"com.example.Cache::fill", false},
		{"[OptimizedTier1] System.String::Concat(string,string)[OptimizedTier1]", true},
		{"[QuickJitted] App.Program::Main(string[])[QuickJitted]", false},
	}
	for _, tt := range tests {
		if got := RuntimeJIT(tt.name); got != tt.runtime {
			t.Errorf("RuntimeJIT(%q) = %v", tt.name, got)
		}
	}
}
