import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

// DirectKeeper.keep keeps 64 MiB of direct ByteBuffers (64 of 1 MiB) in a
// static list, after a warm-up that makes HotSpot compile it. memtrace,
// asked for the JVM's perf map (--jvm-perfmap), must charge their bytes to
// DirectKeeper.keep (docs/runtimes-jit.md).
//
// It prints "ready PID" after the warm-up, waits for a line on stdin,
// keeps the buffers, prints "kept 64", then exits when stdin ends.
public class DirectKeeper {
    static final List<ByteBuffer> kept = new ArrayList<>(128); // never grown: no untaken branch
    static final List<ByteBuffer> scratch = new ArrayList<>(128);

    // keep takes its list as an argument: a branch the warm-up never took
    // would make HotSpot deoptimize keep on the call that matters.
    static int keep(List<ByteBuffer> out, int n, int size) {
        for (int i = 0; i < n; i++) {
            ByteBuffer b = ByteBuffer.allocateDirect(size);
            b.put(0, (byte) i);
            out.add(b);
        }
        return out.size();
    }

    public static void main(String[] args) throws Exception {
        // Warm-up: small buffers, dropped, until keep is compiled.
        for (int round = 0; round < 20000; round++) {
            keep(scratch, 8, 64);
            scratch.clear();
        }
        System.gc(); // the warm-up's buffers' memory goes back now
        System.out.println("ready " + ProcessHandle.current().pid());
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        in.readLine();
        keep(kept, 64, 1 << 20);
        System.out.println("kept " + kept.size());
        System.out.flush();
        while (in.readLine() != null) {
        }
        System.exit(kept.size() == 64 ? 0 : 1);
    }
}
