use super::*;

#[test]
fn framing_forms_and_errors() {
    assert_eq!(Framing::parse("length").unwrap(), Framing::Length);
    assert_eq!(Framing::parse("fixed:12").unwrap(), Framing::Fixed(12));
    assert_eq!(
        Framing::parse("delim:\\r\\n").unwrap(),
        Framing::Delimiter(b"\r\n".to_vec())
    );
    for bad in ["", "fixed:0", "fixed:x", "delim:", "delim:\\q", "lines"] {
        let e = Framing::parse(bad).unwrap_err();
        assert!(e.contains(&format!("\"{bad}\"")), "{e}");
    }
}

#[test]
fn reader_splits_frames_across_and_within_reads() {
    // Two length frames and a partial third, delivered in 3-byte pieces.
    let mut wire = frame(b"hello");
    wire.extend(frame(b""));
    wire.extend(frame(b"world!"));
    struct Chunks(Vec<u8>, usize);
    impl Read for Chunks {
        fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
            let n = 3.min(self.0.len() - self.1).min(b.len());
            b[..n].copy_from_slice(&self.0[self.1..self.1 + n]);
            self.1 += n;
            Ok(n)
        }
    }
    let mut src = Chunks(wire, 0);
    let mut r = FrameReader::default();
    let n = r.read(&mut src, &Framing::Length).unwrap();
    assert_eq!(&r.take(n)[4..], b"hello");
    let n = r.read(&mut src, &Framing::Length).unwrap();
    assert_eq!(n, 4);
    r.take(n);
    let n = r.read(&mut src, &Framing::Length).unwrap();
    assert_eq!(&r.take(n)[4..], b"world!");
    // End of stream mid-way is an error, not a hang or a short frame.
    let e = r.read(&mut src, &Framing::Length).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnexpectedEof);
    // Delimiters: two replies in one read come out one at a time.
    let mut src = std::io::Cursor::new(b"+OK\r\n+PONG\r\n".to_vec());
    let d = Framing::Delimiter(b"\r\n".to_vec());
    let mut r = FrameReader::default();
    let n = r.read(&mut src, &d).unwrap();
    assert_eq!(r.take(n), b"+OK\r\n");
    let n = r.read(&mut src, &d).unwrap();
    assert_eq!(r.take(n), b"+PONG\r\n");
    // A length above the limit is refused before reading it.
    let mut src = std::io::Cursor::new(u32::MAX.to_be_bytes().to_vec());
    let e = FrameReader::default()
        .read(&mut src, &Framing::Length)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidData);
}

#[test]
fn shared_workers_hold_up_their_other_connections() {
    // Four clients, 20 ms of (parallel, unlocked) waiting each.
    let elapsed = |threads: usize| {
        let srv = RrServer::start(RrConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            mode: RrMode::Echo,
            work_ns: 0,
            serial_ns: 20_000_000,
            serialize: false,
            threads,
        })
        .unwrap();
        let addr = srv.local_addr();
        let mut socks: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(addr).unwrap()).collect();
        // Let the workers pick up all four connections first.
        std::thread::sleep(Duration::from_millis(100));
        let t = std::time::Instant::now();
        for s in &mut socks {
            s.write_all(&frame(b"abc")).unwrap();
        }
        for s in &mut socks {
            let mut r = FrameReader::default();
            let n = r.read(s, &Framing::Length).unwrap();
            assert_eq!(&r.take(n)[4..], b"abc");
        }
        let e = t.elapsed();
        assert_eq!(srv.stop().requests, 4);
        e
    };
    // One worker serves the four one after another; four workers at once.
    let one = elapsed(1);
    let four = elapsed(4);
    assert!(one >= Duration::from_millis(78), "{one:?}");
    assert!(four < Duration::from_millis(75), "{four:?}");
}

#[test]
fn replies_reach_a_client_that_half_closed_after_its_requests() {
    for threads in [0, 1] {
        let srv = RrServer::start(RrConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            mode: RrMode::Echo,
            work_ns: 0,
            serial_ns: 0,
            serialize: false,
            threads,
        })
        .unwrap();
        let mut s = TcpStream::connect(srv.local_addr()).unwrap();
        let mut two = frame(b"one");
        two.extend(frame(b"two"));
        s.write_all(&two).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut r = FrameReader::default();
        for want in [&b"one"[..], b"two"] {
            let n = r.read(&mut s, &Framing::Length).unwrap();
            assert_eq!(&r.take(n)[4..], want, "threads {threads}");
        }
        assert_eq!(srv.stop().requests, 2);
    }
}

#[test]
fn server_replaces_and_serialises() {
    let srv = RrServer::start(RrConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        mode: RrMode::Replace,
        work_ns: 0,
        serial_ns: 20_000_000,
        serialize: true,
        threads: 0,
    })
    .unwrap();
    let addr = srv.local_addr();
    // Four clients at once: with the lock, the last reply comes after ~4 x 20 ms.
    let t = std::time::Instant::now();
    let hs: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(addr).unwrap();
                s.write_all(&frame(b"ping ping")).unwrap();
                let mut r = FrameReader::default();
                let n = r.read(&mut s, &Framing::Length).unwrap();
                r.take(n)[4..].to_vec()
            })
        })
        .collect();
    for h in hs {
        assert_eq!(h.join().unwrap(), b"pong pong");
    }
    assert!(
        t.elapsed() >= Duration::from_millis(78),
        "{:?}",
        t.elapsed()
    );
    let rep = srv.stop();
    assert_eq!(rep.requests, 4);
    assert_eq!(rep.connections, 4);
}

#[test]
fn a_reply_that_closes_the_connection_is_written_whole_first() {
    // 4 MiB back to a client that reads only after a while: more than the socket takes at
    // once, so the server must wait for room before it closes (a shared worker once closed
    // at the first short write, cutting the reply).
    let body = vec![b'x'; 4 << 20];
    for threads in [0, 1] {
        let srv = RrServer::start(RrConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            mode: RrMode::Http,
            work_ns: 0,
            serial_ns: 0,
            serialize: false,
            threads,
        })
        .unwrap();
        let mut s = TcpStream::connect(srv.local_addr()).unwrap();
        let mut req = format!(
            "POST / HTTP/1.1\r\nHost: h\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        req.extend_from_slice(&body);
        let writer = {
            let mut w = s.try_clone().unwrap();
            std::thread::spawn(move || w.write_all(&req))
        };
        std::thread::sleep(Duration::from_millis(300));
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut got = vec![];
        s.read_to_end(&mut got).unwrap();
        writer.join().unwrap().unwrap();
        let head_end = memchr::memmem::find(&got, b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8_lossy(&got[..head_end]).to_string();
        assert!(
            head.contains(&format!("Content-Length: {}\r\n", body.len())),
            "threads {threads}: {head}"
        );
        assert_eq!(
            got.len() - head_end,
            body.len(),
            "threads {threads}: {head}"
        );
        srv.stop();
    }
}
