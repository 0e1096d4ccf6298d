package allocator

import "strings"

// RuntimeJIT reports whether a JIT function's name, as a runtime's perf
// map spells it, is the runtime's own code rather than the program's: an
// allocation it makes is charged on to the program's function that called
// it, as for an allocation wrapper (docs/runtimes-jit.md). The names are
// untrusted text; this only decides whom to charge.
//
//   - node/V8: builtins, stubs and handlers ("Builtin:…", "Stub:…"), and
//     JS functions of node's own modules ("JS:*FastBuffer node:internal/buffer:960:14").
//   - HotSpot: the interpreter and stubs, and methods of the JDK's packages
//     (java.*, javax.*, jdk.*, sun.*, com.sun.*), as Compiler.perfmap
//     names them ("long jdk.internal.misc.Unsafe.allocateMemory0(long)").
//   - .NET: stubs, and methods of System.* and Microsoft.* ("[OptimizedTier1] System.String::Concat…").
func RuntimeJIT(name string) bool {
	for _, p := range runtimeJITPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	// A V8 JS function: "JS:<tier><name> <script>:<line>:<column>".
	for _, kind := range []string{"JS:", "LazyCompile:", "Function:"} {
		if rest, ok := strings.CutPrefix(name, kind); ok {
			i := strings.LastIndexByte(rest, ' ')
			return i >= 0 && (strings.HasPrefix(rest[i+1:], "node:") || strings.HasPrefix(rest[i+1:], "internal/"))
		}
	}
	// .NET's tier in brackets first.
	if strings.HasPrefix(name, "[") {
		if i := strings.Index(name, "] "); i > 0 {
			name = name[i+2:]
		}
	}
	// HotSpot's "RETURN_TYPE CLASS.METHOD(ARGS)": the qualified method.
	if i := strings.IndexByte(name, '('); i > 0 {
		head := name[:i]
		name = head[strings.LastIndexByte(head, ' ')+1:]
	}
	for _, p := range runtimeClassPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

var runtimeJITPrefixes = []string{
	// V8's code objects that are no JS function of the program.
	"Builtin:", "BytecodeHandler:", "Stub:", "Handler:", "RegExp:", "Eval:",
	// HotSpot's code blobs.
	"Interpreter", "StubRoutines", "I2C/C2I adapters", "MethodHandlesAdapterBlob", "native nmethod",
	"vtable chunks", "itable stub", "vtable stub", "Stub<", "DeoptimizationBlob", "UncommonTrapBlob",
	"ExceptionBlob", "SafepointBlob", "RuntimeStub",
}

var runtimeClassPrefixes = []string{
	"java.", "javax.", "jdk.", "sun.", "com.sun.", // HotSpot
	"System.", "Microsoft.", "Internal.", "dynamicClass", // .NET
}
