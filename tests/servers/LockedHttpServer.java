// S3 in miniature for tests/s3_http.rs: an HTTP/1.1 service on the JDK's
// com.sun.net.httpserver with an executor of 8 threads, whose handler does its work (a
// sleep of SLEEP_MS, like a database round trip: a wait that needs no CPU) inside one
// global lock (synchronized: S3's SELECT ... FOR UPDATE) when LOCK is 1, outside it when
// 0. Every request on any path is answered 200 "ok\n" (keep-alive).
// Usage: java LockedHttpServer.java PORT SLEEP_MS LOCK
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.Executors;

public class LockedHttpServer {
    static final Object LOCK = new Object();

    static void work(long ms) throws InterruptedException {
        Thread.sleep(ms);
    }

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        long ms = Long.parseLong(args[1]);
        boolean locked = args[2].equals("1");
        byte[] ok = "ok\n".getBytes(StandardCharsets.US_ASCII);
        // TCP_NODELAY on accepted connections: the reply's head and body leave as two
        // writes, and Nagle would hold the body for the client's delayed ACK (40 ms).
        System.setProperty("sun.net.httpserver.nodelay", "true");
        HttpServer server = HttpServer.create(
            new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 1024);
        server.createContext("/", (HttpExchange ex) -> {
            try (ex) {
                try (InputStream in = ex.getRequestBody()) {
                    in.readAllBytes();
                }
                if (locked) {
                    synchronized (LOCK) {
                        work(ms);
                    }
                } else {
                    work(ms);
                }
                ex.sendResponseHeaders(200, ok.length);
                try (OutputStream out = ex.getResponseBody()) {
                    out.write(ok);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        server.setExecutor(Executors.newFixedThreadPool(8));
        server.start();
    }
}
