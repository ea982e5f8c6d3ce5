// S1's server in miniature: a single-threaded java.net.DatagramSocket server that never
// sets its receive buffer, does a small find-and-replace on each ~1 KiB message and
// answers it. usage: java UdpServer.java PORT  (prints "ready"; ends by itself after 120 s)
import java.net.DatagramPacket;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.SocketTimeoutException;

public class UdpServer {
    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        DatagramSocket s = new DatagramSocket(port, InetAddress.getByName("127.0.0.1"));
        s.setSoTimeout(500);
        System.out.println("ready rcvbuf " + s.getReceiveBufferSize());
        System.out.flush();
        byte[] buf = new byte[4096];
        long end = System.nanoTime() + 120_000_000_000L;
        while (System.nanoTime() < end) {
            DatagramPacket p = new DatagramPacket(buf, buf.length);
            try {
                s.receive(p);
            } catch (SocketTimeoutException e) {
                continue;
            }
            byte[] d = p.getData();
            // find-and-replace past tpslab's 40-byte header: every 'a' becomes 'b'
            for (int i = 40; i < p.getLength(); i++) {
                if (d[i] == 'a') d[i] = 'b';
            }
            s.send(new DatagramPacket(d, p.getLength(), p.getSocketAddress()));
        }
    }
}
