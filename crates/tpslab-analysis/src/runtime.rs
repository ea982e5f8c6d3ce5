//! Which runtime a server process runs on, and the line that sets a UDP socket's receive
//! buffer in it. Pure: the engine reads `/proc/PID/exe`, `/proc/PID/maps` and the
//! executable, and hands the facts to [`classify`].

use serde::{Deserialize, Serialize};

/// A server's runtime, as far as the buffer advice is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Runtime {
    /// A JVM (java, or any executable that maps libjvm.so).
    Java,
    /// CPython (python3*, or an executable that maps libpython).
    Python,
    /// A Go binary (carries the Go build-info blob).
    Go,
    /// Node.js.
    Node,
    /// Anything else: C, C++, Rust, ... (setsockopt).
    Native,
}

impl Runtime {
    /// Lower-case name, as in the record.
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Java => "java",
            Runtime::Python => "python",
            Runtime::Go => "go",
            Runtime::Node => "node",
            Runtime::Native => "c/native",
        }
    }
}

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
