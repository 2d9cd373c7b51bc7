import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.Arrays;

/**
 * Runs another class's main (argv[0]) and then ends the JVM at once, with the exit status the JVM would give
 * (0, or 1 when main threw). Without it every run lasts 2-3 s past its work: RocketMQ's shutdown() calls
 * Netty's shutdownGracefully(), whose event-loop threads (not daemons) linger for a 2 s quiet period. A short
 * grace first lets the channel closes and writes queued by shutdown() (a oneway send's, say) reach the socket.
 */
public final class Launch {
    private static final long GRACE_MS = 500;

    private Launch() {
    }

    public static void main(String[] argv) throws Exception {
        Method main = Class.forName(argv[0]).getMethod("main", String[].class);
        int status = 0;
        try {
            main.invoke(null, (Object) Arrays.copyOfRange(argv, 1, argv.length));
        } catch (InvocationTargetException thrown) {
            System.err.print("Exception in thread \"main\" ");
            thrown.getCause().printStackTrace();
            status = 1;
        }
        System.out.flush();
        System.err.flush();
        Thread.sleep(GRACE_MS);
        System.exit(status);
    }
}
