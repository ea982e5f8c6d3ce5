// A small Java TCP service for tests/suite/threads.rs: a ServerSocket whose connections are
// served by a fixed pool of 8 threads (one connection per thread); each request is a
// line, answered "+OK\r\n" after its work: a sleep of SLEEP_MS, inside one global lock
// (synchronized) when LOCK is 1 (S3's SELECT ... FOR UPDATE), outside it when 0.
// Usage: java LockedTcpServer.java PORT SLEEP_MS LOCK
import java.io.*;
import java.net.*;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.*;

public class LockedTcpServer {
    static final Object LOCK = new Object();

    static void work(long ms) throws InterruptedException {
        Thread.sleep(ms);
    }

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        long ms = Long.parseLong(args[1]);
        boolean locked = args[2].equals("1");
        ExecutorService pool = Executors.newFixedThreadPool(8);
        byte[] ok = "+OK\r\n".getBytes(StandardCharsets.US_ASCII);
        try (ServerSocket ss = new ServerSocket()) {
            ss.setReuseAddress(true);
            ss.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 128);
            while (true) {
                Socket s = ss.accept();
                pool.execute(() -> {
                    try (s) {
                        s.setTcpNoDelay(true);
                        BufferedReader in = new BufferedReader(
                            new InputStreamReader(s.getInputStream(), StandardCharsets.US_ASCII));
                        OutputStream out = s.getOutputStream();
                        while (in.readLine() != null) {
                            if (locked) {
                                synchronized (LOCK) {
                                    work(ms);
                                }
                            } else {
                                work(ms);
                            }
                            out.write(ok);
                            out.flush();
                        }
                    } catch (Exception e) {
                        // The connection closed: its thread serves the next one.
                    }
                });
            }
        }
    }
}
