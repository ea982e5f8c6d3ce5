//! Which runtime a server process runs on, and the line that sets a UDP socket's receive
//! buffer in it. Pure: the engine reads `/proc/PID/exe`, `/proc/PID/maps` and the
//! executable, and hands the facts to [`classify`].

use tpslab_record::runtime::{Runtime, ALL};

/// Classifies a process from the base name of its executable, the text of its
/// `/proc/PID/maps` (mapped libraries), and whether its executable holds Go's build-info
/// magic (`\xff Go buildinf:`).
pub fn classify(exe_name: &str, maps: &str, go_buildinfo: bool) -> Runtime {
    let exe = exe_name.to_ascii_lowercase();
    if exe == "java" || maps.contains("/libjvm.so") {
        Runtime::Java
    } else if exe.starts_with("python") || maps.contains("/libpython") {
        Runtime::Python
    } else if exe == "node" || exe == "nodejs" || maps.contains("/libnode.so") {
        Runtime::Node
    } else if go_buildinfo {
        Runtime::Go
    } else {
        Runtime::Native
    }
}

/// The line(s) that ask for a receive buffer of `req` bytes in `rt` (the kernel grants
/// 2 x req, capped first at net.core.rmem_max), with what the runtime reports back.
pub fn rcvbuf_lines(rt: Runtime, req: u64) -> Vec<String> {
    let granted = 2 * req;
    match rt {
        Runtime::Java => vec![
            format!("socket.setReceiveBufferSize({req}); // java.net.DatagramSocket or DatagramChannel.setOption(StandardSocketOptions.SO_RCVBUF, {req}), before receiving"),
            format!("// the kernel grants {granted}; getReceiveBufferSize() then reports {req}: on Linux the JDK halves SO_RCVBUF when reading it back, so it reports half of the kernel's figure (a socket that never set it reports rmem_default / 2)"),
        ],
        Runtime::Python => vec![format!(
            "sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, {req})  # before the recvfrom loop; getsockopt reads {granted}"
        )],
        Runtime::Go => vec![format!(
            "conn.SetReadBuffer({req}) // *net.UDPConn; the kernel grants {granted}"
        )],
        Runtime::Node => vec![format!(
            "dgram.createSocket({{ type: 'udp4', recvBufferSize: {req} }}) // or socket.setRecvBufferSize({req}) after bind; the kernel grants {granted}"
        )],
        Runtime::Native => vec![format!(
            "int n = {req}; setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &n, sizeof n); /* kernel grants 2n = {granted} */"
        )],
    }
}

/// The lines that give each of `n` readers (threads, or processes: [`Runtime::readers`])
/// a socket of its own on the server's port, joined in one SO_REUSEPORT group (the kernel
/// spreads datagrams over the group by flow hash), in `rt`'s own API. Each socket sets
/// the option before its bind; sockets of one group must belong to the same user.
pub fn reuseport_lines(rt: Runtime, n: usize) -> Vec<String> {
    match rt {
        Runtime::Java => vec![format!(
            "DatagramChannel ch = DatagramChannel.open(StandardProtocolFamily.INET).setOption(StandardSocketOptions.SO_REUSEPORT, true).bind(new InetSocketAddress(port)); // Java 9+; one channel per thread, {n} threads (INET6 for an IPv6 address)"
        )],
        Runtime::Python => vec![
            "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1); s.bind((host, port))  # AF_INET6 for an IPv6 address".into(),
            format!("# in each of {n} processes (multiprocessing.Process or os.fork), each creating its own socket after the fork: CPython's GIL runs one thread's Python code at a time, so threads do not read in parallel"),
        ],
        Runtime::Go => vec![
            "lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error { var err error; if e := c.Control(func(fd uintptr) { err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) }); e != nil { return e }; return err }} // golang.org/x/sys/unix".into(),
            format!("conn, err := lc.ListenPacket(context.Background(), \"udp\", addr) // one conn per reading goroutine, {n} of them (goroutines reading one conn take turns on its lock)"),
        ],
        Runtime::Node => vec![
            "const s = dgram.createSocket({ type: 'udp4', reusePort: true }); s.bind(port, host); // Node 22.12+ ('udp6' for an IPv6 address)".into(),
            format!("// in each of {n} processes, one JavaScript thread each (node:cluster workers bind with {{ port, exclusive: true }}: without it they share one socket)"),
        ],
        Runtime::Native => vec![format!(
            "int one = 1; setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one); /* before bind(); one socket per thread, {n} threads */"
        )],
    }
}

/// The lines that read (and answer) up to 64 datagrams per system call in `rt`
/// (recvmmsg/sendmmsg); None where the runtime's standard library has no batch receive
/// (Java, Python, Node).
pub fn batch_lines(rt: Runtime) -> Option<Vec<String>> {
    match rt {
        Runtime::Go => Some(vec![
            "pc := ipv4.NewPacketConn(conn); msgs := make([]ipv4.Message, 64); n, err := pc.ReadBatch(msgs, 0) // golang.org/x/net/ipv4 (recvmmsg); answer with pc.WriteBatch".into(),
        ]),
        Runtime::Native => Some(vec![
            "struct mmsghdr msgs[64]; int n = recvmmsg(fd, msgs, 64, MSG_WAITFORONE, NULL); /* answer the n with one sendmmsg(fd, replies, n, 0) */".into(),
        ]),
        Runtime::Java | Runtime::Python | Runtime::Node => None,
    }
}

/// For a server whose runtime is unknown: the lines of each runtime of [`ALL`] that has
/// some, each prefixed with the runtime's name (`python: ...`), after one line saying the
/// runtime is unknown and why (`why`, e.g. "the server's process was not found").
pub fn every_runtime(why: &str, lines: impl Fn(Runtime) -> Vec<String>) -> Vec<String> {
    let mut out = vec![format!(
        "# the server's runtime is unknown ({why}): the lines for each common runtime"
    )];
    for rt in ALL {
        out.extend(lines(rt).into_iter().map(|l| format!("{}: {l}", rt.name())));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_from_exe_maps_and_go_magic() {
        let jvm =
            "7f00-7f10 r-xp 0 08:01 1 /usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so\n";
        assert_eq!(classify("java", "", false), Runtime::Java);
        assert_eq!(classify("myservice", jvm, false), Runtime::Java);
        assert_eq!(classify("python3.11", "", false), Runtime::Python);
        assert_eq!(
            classify(
                "uwsgi",
                "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0",
                false
            ),
            Runtime::Python
        );
        assert_eq!(classify("node", "", false), Runtime::Node);
        assert_eq!(classify("coredns", "", true), Runtime::Go);
        assert_eq!(
            classify("memcached", "/usr/lib/libc.so.6", false),
            Runtime::Native
        );
    }

    #[test]
    fn java_line_explains_the_halved_report() {
        let l = rcvbuf_lines(Runtime::Java, 1_000_000).join("\n");
        assert!(l.contains("setReceiveBufferSize(1000000)"));
        assert!(l.contains("grants 2000000"));
        assert!(l.contains("halves"));
    }
}
