import java.util.ArrayList;

// HeapKeeper keeps ~130 MiB of Java arrays (2000 of 64 KiB, and small ones),
// with a collection in between: G1 copies them, and the allocation paths
// zero them. memtrace's resident table names the pages they made resident
// "Java heap", by the collector or allocator that wrote them
// (docs/runtimes-jit.md).
public class HeapKeeper {
    static final ArrayList<Object> kept = new ArrayList<>();

    public static void main(String[] args) {
        for (int i = 0; i < 2000; i++) {
            kept.add(new byte[64 * 1024]);
            if (i % 10 == 0) {
                kept.add(new Object[1000]);
            }
        }
        System.gc();
        for (int i = 0; i < 200000; i++) {
            kept.add(new int[8]);
        }
        System.out.println("kept " + kept.size());
    }
}
