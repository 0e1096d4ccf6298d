// Idle prints its pid, then waits for a line on stdin: a JVM at rest, for
// as long as a test (or a person running memtrace on it) needs.
public class Idle {
    public static void main(String[] a) throws Exception {
        System.out.println("ready " + ProcessHandle.current().pid());
        System.out.flush();
        System.in.read();
        System.out.println("bye");
    }
}
