//! The HTTP/3 client's UDP sockets, counted where quinn hands datagrams to the kernel and
//! takes them back: every datagram of every endpoint, a handshake that failed or timed
//! out included (quinn's per-connection `udp_tx`/`udp_rx` die with a connection that was
//! never made, so a server-side ledger counted more than the client had sent).

use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};

/// What the run's client sockets moved, summed over every endpoint (one per connection
/// made or tried): datagrams and UDP payload bytes handed to the kernel (quinn-udp's send
/// returned success: see `send_failed_datagrams`) and given by it (`recvmsg`); a GSO send
/// or GRO read counts each datagram in it.
#[derive(Debug, Default)]
pub(crate) struct SocketCounts {
    pub(crate) sent_datagrams: AtomicU64,
    pub(crate) sent_bytes: AtomicU64,
    /// Datagrams of sends the socket reported failed (other than EAGAIN). quinn-udp 0.5's
    /// socket reports a send the kernel refused (EMSGSIZE, EPERM...) as made, logging and
    /// dropping it: such datagrams are in `sent_datagrams`, so this stays 0 with it, and a
    /// refused datagram shows in the ledger as sent and unattributed, not as failed.
    pub(crate) send_failed_datagrams: AtomicU64,
    pub(crate) received_datagrams: AtomicU64,
    pub(crate) received_bytes: AtomicU64,
}

/// Datagrams in a buffer of `len` bytes cut every `segment` bytes (the last may be
/// shorter); `segment` 0 or over `len`: one.
fn datagrams(len: usize, segment: usize) -> u64 {
    if segment == 0 || len <= segment {
        1
    } else {
        len.div_ceil(segment) as u64
    }
}

/// quinn's own socket for the runtime, with the counts kept on the way.
struct Counted {
    inner: Arc<dyn AsyncUdpSocket>,
    counts: Arc<SocketCounts>,
}

impl fmt::Debug for Counted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Counted")
            .field("inner", &self.inner)
            .finish()
    }
}

impl AsyncUdpSocket for Counted {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, t: &Transmit) -> io::Result<()> {
        let n = datagrams(t.contents.len(), t.segment_size.unwrap_or(0));
        let r = self.inner.try_send(t);
        match &r {
            Ok(()) => {
                self.counts.sent_datagrams.fetch_add(n, Relaxed);
                self.counts
                    .sent_bytes
                    .fetch_add(t.contents.len() as u64, Relaxed);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => {
                self.counts.send_failed_datagrams.fetch_add(n, Relaxed);
            }
        }
        r
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        let r = self.inner.poll_recv(cx, bufs, meta);
        if let Poll::Ready(Ok(n)) = &r {
            for m in &meta[..*n] {
                self.counts
                    .received_datagrams
                    .fetch_add(datagrams(m.len, m.stride), Relaxed);
                self.counts.received_bytes.fetch_add(m.len as u64, Relaxed);
            }
        }
        r
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

/// A client endpoint as `quinn::Endpoint::client(bind)` makes it (an IPv6 socket
/// dual-stack), its socket counted into `counts`. Errors: the socket, its bind, no tokio
/// runtime on this thread.
pub(crate) fn client(bind: SocketAddr, counts: &Arc<SocketCounts>) -> io::Result<quinn::Endpoint> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(bind),
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    if bind.is_ipv6() {
        // As quinn's: dual-stack where the host allows it, else IPv6 only.
        let _ = socket.set_only_v6(false);
    }
    socket.bind(&bind.into())?;
    let runtime =
        quinn::default_runtime().ok_or_else(|| io::Error::other("no async runtime found"))?;
    let inner = runtime.wrap_udp_socket(socket.into())?;
    let counted = Arc::new(Counted {
        inner,
        counts: counts.clone(),
    });
    quinn::Endpoint::new_with_abstract_socket(
        quinn::EndpointConfig::default(),
        None,
        counted,
        runtime,
    )
}

impl SocketCounts {
    /// The counts into `q`'s datagram and byte fields (what the sockets moved, in place
    /// of the connections' own sums).
    pub(crate) fn fill(&self, q: &mut tpslab_record::quic::QuicPaths) {
        q.datagrams_sent = self.sent_datagrams.load(Relaxed);
        q.datagrams_received = self.received_datagrams.load(Relaxed);
        q.udp_bytes_sent = self.sent_bytes.load(Relaxed);
        q.udp_bytes_received = self.received_bytes.load(Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gso_buffer_is_its_datagrams_and_a_plain_one_is_one() {
        assert_eq!(datagrams(1200, 0), 1);
        assert_eq!(datagrams(1200, 1200), 1);
        assert_eq!(datagrams(100, 1200), 1);
        assert_eq!(datagrams(3600, 1200), 3);
        assert_eq!(datagrams(3601, 1200), 4);
        assert_eq!(datagrams(0, 0), 1);
    }

    /// A handshake that never completes (nothing answers): its Initial datagrams are
    /// counted at the socket though no connection's statistics ever hold them.
    #[test]
    fn a_handshake_that_times_out_is_counted_at_the_socket() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // A bound UDP socket that never reads: the datagrams arrive, nothing answers.
        let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let target = silent.local_addr().unwrap();
        let counts = Arc::new(SocketCounts::default());
        rt.block_on(async {
            let ep = client("0.0.0.0:0".parse().unwrap(), &counts).unwrap();
            let tls = crate::client::proto::tls::TlsClient::new(
                &tpslab_plan::http::TlsSettings {
                    insecure: true,
                    ..Default::default()
                },
                "localhost",
                &[b"h3"],
            )
            .unwrap();
            let quic =
                quinn::crypto::rustls::QuicClientConfig::try_from(tls.quic_parts().0).unwrap();
            let cfg = quinn::ClientConfig::new(Arc::new(quic));
            let connecting = ep.connect_with(cfg, target, "localhost").unwrap();
            let r = tokio::time::timeout(std::time::Duration::from_millis(300), connecting).await;
            assert!(r.is_err(), "nothing answers: the handshake times out");
        });
        drop(rt);
        let sent = counts.sent_datagrams.load(Relaxed);
        assert!(sent >= 1, "the Initial sent: {counts:?}");
        assert!(counts.sent_bytes.load(Relaxed) >= 1200 * sent, "{counts:?}");
        assert_eq!(counts.received_datagrams.load(Relaxed), 0);
        // What the kernel queued at the silent socket is what was counted.
        silent.set_nonblocking(true).unwrap();
        let mut got = 0;
        let mut buf = [0u8; 2048];
        while silent.recv(&mut buf).is_ok() {
            got += 1;
        }
        assert_eq!(got, sent, "{counts:?}");
    }
}
