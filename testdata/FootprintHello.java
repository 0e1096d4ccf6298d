// The JVM footprint fixture (TestFootprintJVM): a small program whose heap
// commits a little of what the JVM reserved.
public class FootprintHello {
    public static void main(String[] args) {
        byte[][] keep = new byte[200][];
        for (int i = 0; i < keep.length; i++) {
            keep[i] = new byte[1 << 20];
        }
        long sum = 0;
        for (byte[] b : keep) {
            sum += b.length;
        }
        System.out.println("allocated " + sum);
    }
}
