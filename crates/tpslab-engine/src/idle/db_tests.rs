use super::*;

/// MySQL's documented example (sql/auth/password.c scramble_411): the answer is
/// SHA1(pw) XOR SHA1(scramble + SHA1(SHA1(pw))); checked against a recomputation
/// from its parts, and SHA1("") style edge: an empty password answers nothing.
#[test]
fn native_password_is_the_xor_of_the_two_hashes() {
    let scramble = b"abcdefghijklmnopqrst";
    let a = native_password(b"secret", scramble);
    assert_eq!(a.len(), 20);
    // XOR back with SHA1(pw) gives SHA1(scramble + SHA1(SHA1(pw))).
    let s1 = Sha1::digest(b"secret");
    let back: Vec<u8> = a.iter().zip(s1.iter()).map(|(x, y)| x ^ y).collect();
    let mut h = Sha1::new();
    h.update(scramble);
    h.update(Sha1::digest(s1));
    assert_eq!(back, h.finalize().to_vec());
    assert!(native_password(b"", scramble).is_empty());
}

#[test]
fn goodbyes_are_parsed_and_messages_bounded() {
    // PostgreSQL's ErrorResponse for idle_session_timeout (fields as the server
    // writes them: S, V, C, M, then a NUL).
    let mut body = vec![];
    for (t, v) in [
        (b'S', "FATAL"),
        (b'V', "FATAL"),
        (b'C', "57P05"),
        (b'M', "terminating connection due to idle-session timeout"),
    ] {
        body.push(t);
        body.extend_from_slice(v.as_bytes());
        body.push(0);
    }
    body.push(0);
    let mut buf = BytesMut::new();
    buf.extend_from_slice(b"E");
    buf.extend_from_slice(&((body.len() + 4) as i32).to_be_bytes());
    buf.extend_from_slice(&body);
    let Some(backend::Message::ErrorResponse(e)) = pg_next(&mut buf).unwrap() else {
        panic!("an ErrorResponse")
    };
    let g = pg_error(&e);
    assert_eq!(g.code, "57P05");
    assert_eq!(
        g.message,
        "FATAL: terminating connection due to idle-session timeout"
    );
    // A length over the cap is refused before it is buffered.
    let mut huge = BytesMut::new();
    huge.extend_from_slice(b"E");
    huge.extend_from_slice(&(1_000_000i32).to_be_bytes());
    assert!(pg_next(&mut huge).is_err());
    // MySQL's ERR packet: 0xff, 4031, #HY000, the message.
    let mut p = vec![0xff, 0xbf, 0x0f, b'#'];
    p.extend_from_slice(b"HY000The client was disconnected by the server because of inactivity.");
    let g = my_error(&p);
    assert_eq!(g.code, "4031");
    assert!(
        g.message.starts_with("The client was disconnected"),
        "{g:?}"
    );
    let mut big = BytesMut::new();
    big.extend_from_slice(&[0xff, 0xff, 0xff, 0]);
    assert!(my_next(&mut big).is_err());
    let mut r = BytesMut::new();
    r.extend_from_slice(b"+PONG\r\n-ERR x");
    assert_eq!(redis_next(&mut r).unwrap().as_deref(), Some("+PONG"));
    assert_eq!(redis_next(&mut r).unwrap(), None);
    assert_eq!(redis_error("-WRONGPASS invalid").code, "WRONGPASS");
    let g = Goodbye::new("X", &"é".repeat(200));
    assert!(g.message.len() <= Goodbye::MAX_MESSAGE);
    assert_eq!(
        redis_command(&[b"AUTH", b"pw"]),
        b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n"
    );
}

/// A PostgreSQL-protocol server that answers the start-up with endless ParameterStatus
/// messages (valid, ignored by the login): the login ends at its deadline, not never.
#[test]
fn a_server_that_never_finishes_the_login_is_cut_at_the_login_timeout() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let srv = std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        let mut b = [0u8; 1024];
        let _ = c.read(&mut b);
        // 'S', length 8 (itself and "a\0b\0"), every 50 ms until the probe goes.
        let msg = [b'S', 0, 0, 0, 8, b'a', 0, b'b', 0];
        let end = Instant::now() + Duration::from_secs(20);
        while Instant::now() < end && c.write_all(&msg).is_ok() {
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    let login = Login::new("probe", None, None).unwrap();
    let t = Instant::now();
    let e = DbConn::login(addr, DbProtocol::Postgres, &login)
        .err()
        .expect("the login never completes");
    let took = t.elapsed();
    assert_eq!(e.to_string(), "no answer within 5 s");
    assert!(
        took >= LOGIN_TIMEOUT && took < LOGIN_TIMEOUT + Duration::from_secs(2),
        "{took:?}"
    );
    srv.join().unwrap();
}
