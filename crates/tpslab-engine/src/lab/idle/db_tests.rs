use super::*;
use crate::client::proto::resp::Scan;
use sha1::{Digest, Sha1};

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
    let mut sc = Scan::default();
    assert_eq!(
        resp_next(&mut r, &mut sc).unwrap(),
        Some(Resp::Simple("PONG".into()))
    );
    assert_eq!(resp_next(&mut r, &mut sc).unwrap(), None);
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

/// RESP2 and RESP3 as Redis 7 writes them: CONFIG GET's array (RESP2) and map (RESP3),
/// HELLO 3's map with a nested array, a push before an answer, an attribute, errors;
/// incomplete values wait, oversized and over-nested ones are refused.
#[test]
fn resp_values_of_both_versions_are_read_and_bounded() {
    let read = |bytes: &[u8]| {
        let mut b = BytesMut::from(bytes);
        let (mut out, mut sc) = (vec![], Scan::default());
        while let Some(v) = resp_next(&mut b, &mut sc).unwrap() {
            out.push(v);
        }
        (out, b.len())
    };
    let bulk = |s: &str| Resp::Bulk(Some(s.as_bytes().to_vec()));
    let (v, left) = read(b"*2\r\n$7\r\ntimeout\r\n$1\r\n2\r\n%1\r\n$7\r\ntimeout\r\n$1\r\n0\r\n");
    assert_eq!(left, 0);
    assert_eq!(v[0], Resp::Array(Some(vec![bulk("timeout"), bulk("2")])));
    assert_eq!(v[1], Resp::Array(Some(vec![bulk("timeout"), bulk("0")])));
    assert_eq!(v[1].clone().text(), None);
    let hello =
        b"%3\r\n$6\r\nserver\r\n$5\r\nredis\r\n$5\r\nproto\r\n:3\r\n$7\r\nmodules\r\n*0\r\n";
    let (v, _) = read(hello);
    assert!(
        matches!(&v[0], Resp::Array(Some(items)) if items.len() == 6 && items[3] == Resp::Int(3))
    );
    let (v, _) = read(
        b">2\r\n$7\r\nmessage\r\n$1\r\nx\r\n|1\r\n+ttl\r\n:3\r\n+PONG\r\n_\r\n!9\r\nERR bad x\r\n",
    );
    assert!(matches!(&v[0], Resp::Push(p) if p.len() == 2));
    assert_eq!(v[1], Resp::Simple("PONG".into()), "the attribute skipped");
    assert_eq!(v[2], Resp::Other(String::new()));
    assert_eq!(v[3], Resp::Error("ERR bad x".into()));
    // Incomplete: nothing taken until the rest comes.
    let (v, left) = read(b"*2\r\n$7\r\ntimeout\r\n$1\r\n");
    assert!(v.is_empty() && left > 0);
    let too = |bytes: &[u8]| resp_next(&mut BytesMut::from(bytes), &mut Scan::default()).is_err();
    assert!(too(b"$999999999\r\n"));
    assert!(too(b"*99999999\r\n"));
    assert!(too(&b"*1\r\n".repeat(20)));
    assert!(too(b"?what\r\n"));
}

/// Review finding 1: a hostile server's chain of RESP3 attributes within the buffer.
/// `|0` 32,000 times (128,000 bytes) then `+PONG`: skipped one by one and PONG read (the
/// parser called itself at the same depth for each: 32,000 frames, a stack overflow);
/// the same chain inside an array is refused at RESP_DEPTH, each attribute a level.
#[test]
fn a_chain_of_attributes_is_skipped_or_refused_never_recursed() {
    let mut chain = b"|0\r\n".repeat(32_000);
    chain.extend_from_slice(b"+PONG\r\n");
    assert!(chain.len() <= RESP_VALUE_BYTES);
    let mut b = BytesMut::from(&chain[..]);
    assert_eq!(
        resp_next(&mut b, &mut Scan::default()).unwrap(),
        Some(Resp::Simple("PONG".into()))
    );
    assert!(b.is_empty());
    let nested = [
        b"*1\r\n".to_vec(),
        b"|0\r\n".repeat(32_000),
        b":1\r\n".to_vec(),
    ]
    .concat();
    let e = resp_next(&mut BytesMut::from(&nested[..]), &mut Scan::default()).unwrap_err();
    assert_eq!(e.to_string(), "malformed RESP (nested too deep)");
    assert!(resp_parse(&nested[4..], 0).is_err());
    // Within the bound an attribute before an element describes it: [1].
    let one = b"*1\r\n|1\r\n+ttl\r\n:3\r\n:1\r\n";
    assert_eq!(
        resp_next(&mut BytesMut::from(&one[..]), &mut Scan::default()).unwrap(),
        Some(Resp::Array(Some(vec![Resp::Int(1)])))
    );
}

/// Review finding 3: counts and settings near u64/i64's end are refused, not overflowed
/// (a map of i64::MAX pairs: `2 * n` panicked under overflow checks; a timeout of more
/// seconds than u64 ms hold wrapped to a small false setting in release).
#[test]
fn counts_and_settings_past_the_integers_are_refused() {
    for huge in [
        &b"%9223372036854775807\r\n"[..],
        b"|4611686018427387904\r\n",
    ] {
        assert!(resp_parse(huge, 0).is_err(), "{huge:?}");
        assert!(resp_next(&mut BytesMut::from(huge), &mut Scan::default()).is_err());
    }
    assert_eq!(seconds_ms("300"), Some(300_000));
    assert_eq!(seconds_ms(" 0\n"), Some(0));
    let top = u64::MAX / 1000;
    assert_eq!(seconds_ms(&top.to_string()), Some(top * 1000));
    assert_eq!(seconds_ms(&(top + 1).to_string()), None);
    assert_eq!(seconds_ms("18446744073709551615"), None);
    assert_eq!(seconds_ms("-1"), None);
    assert_eq!(seconds_ms("2s"), None);
}

/// Review finding 2 for probe idle: a value fed a little at a time is scanned once and
/// parsed once. An array of 40,000 nulls (120,006 bytes, within the buffer), one element
/// a read: whole in well under a second (parsed again from its start at each read, with
/// a String per element, it was about 8e8 element parses: tens of seconds).
#[test]
fn a_value_fed_one_element_a_read_is_parsed_once() {
    let n = 40_000;
    let mut b = BytesMut::from(format!("*{n}\r\n").as_bytes());
    let mut sc = Scan::default();
    let t = Instant::now();
    for _ in 0..n {
        assert_eq!(resp_next(&mut b, &mut sc).unwrap(), None);
        b.extend_from_slice(b"_\r\n");
    }
    let v = resp_next(&mut b, &mut sc).unwrap();
    let took = t.elapsed();
    assert!(matches!(&v, Some(Resp::Array(Some(items))) if items.len() == n));
    assert!(b.is_empty());
    assert!(took < Duration::from_secs(2), "{took:?}");
}

/// A handshake v10 as MariaDB 10.11 sends it (capabilities with CLIENT_SSL off and
/// PLUGIN_AUTH on, a 21-byte scramble length, the plugin's name), and MySQL 8's naming
/// caching_sha2_password; auth switches; the line for a plugin not spoken.
#[test]
fn the_mysql_handshake_names_its_plugin_and_unknown_plugins_are_refused_in_one_line() {
    let hs = |plugin: &str, caps_lo: u16| {
        let mut p = vec![10];
        p.extend_from_slice(b"10.11.19-MariaDB-0+deb12u1\0");
        p.extend_from_slice(&7u32.to_le_bytes());
        p.extend_from_slice(b"abcdefgh\0");
        p.extend_from_slice(&caps_lo.to_le_bytes());
        p.push(45);
        p.extend_from_slice(&2u16.to_le_bytes());
        p.extend_from_slice(&0x81bfu16.to_le_bytes()); // upper: PLUGIN_AUTH (0x0008) among them
        p.push(21);
        p.extend_from_slice(&[0u8; 10]);
        p.extend_from_slice(b"ijklmnopqrst\0");
        p.extend_from_slice(plugin.as_bytes());
        p.push(0);
        p
    };
    let h = my_handshake(&hs("mysql_native_password", 0xf7fe)).unwrap();
    assert_eq!(h.version, "10.11.19-MariaDB-0+deb12u1");
    assert_eq!(h.scramble, b"abcdefghijklmnopqrst");
    assert_eq!((h.plugin.as_str(), h.tls), ("mysql_native_password", false));
    let h = my_handshake(&hs("caching_sha2_password", 0xfffe)).unwrap();
    assert_eq!((h.plugin.as_str(), h.tls), ("caching_sha2_password", true));
    assert!(my_handshake(&hs("x", 0)[..20])
        .unwrap_err()
        .contains("too short"));
    assert!(my_handshake(b"\x09abc")
        .unwrap_err()
        .contains("protocol 10"));
    let mut sw = vec![0xfe];
    sw.extend_from_slice(b"client_ed25519\0");
    sw.extend_from_slice(b"0123456789abcdefghij0123456789ab\0");
    let (plugin, data) = my_auth_switch(&sw);
    assert_eq!((plugin.as_str(), data.len()), ("client_ed25519", 32));
    assert_eq!(
        unsupported_plugin(&plugin),
        "authentication plugin client_ed25519 not supported: probe idle --protocol mysql speaks mysql_native_password only"
    );
}

/// What the servers say when they require TLS (PostgreSQL 15's pg_hba refusal of a
/// connection without it, MySQL's require_secure_transport), against a plain refusal;
/// PostgreSQL's SHOW values; MySQL's text rows.
#[test]
fn tls_refusals_settings_and_rows_are_read() {
    let pg = Goodbye::new(
        "28000",
        "FATAL: no pg_hba.conf entry for host \"127.0.0.1\", user \"t\", database \"postgres\", no encryption",
    );
    assert!(says_tls_required(DbProtocol::Postgres, &pg));
    let wrong = Goodbye::new(
        "28P01",
        "FATAL: password authentication failed for user \"t\"",
    );
    assert!(!says_tls_required(DbProtocol::Postgres, &wrong));
    let my = Goodbye::new(
        "3159",
        "Connections using insecure transport are prohibited while --require_secure_transport=ON.",
    );
    assert!(says_tls_required(DbProtocol::Mysql, &my));
    // MariaDB 10.11 under require_secure_transport (TLS on) refuses a plain login as it
    // refuses a wrong password (seen on this host): not said to require TLS, only that
    // it offers it.
    let denied = Goodbye::new(
        "1045",
        "Access denied for user 'probe'@'localhost' (using password: YES)",
    );
    assert!(!says_tls_required(DbProtocol::Mysql, &denied));
    assert!(tls_maybe(true, &denied).contains("this server offers TLS"));
    assert_eq!(tls_maybe(false, &denied), "");
    assert!(tls_line(DbProtocol::Postgres, &pg).starts_with("server requires TLS; --protocol postgres has no TLS yet (it said: FATAL: no pg_hba.conf entry"));
    for (t, ms) in [
        ("0", Some(0)),
        ("2s", Some(2000)),
        ("250ms", Some(250)),
        ("10min", Some(600_000)),
        ("1h", Some(3_600_000)),
        ("1d", Some(86_400_000)),
        ("1500", Some(1500)),
        ("off", None),
        ("2 weeks", None),
    ] {
        assert_eq!(pg_duration_ms(t), ms, "{t}");
    }
    // A row of "2" and NULL; a column count; an EOF packet.
    assert_eq!(my_row(&[1, b'2', 0xfb]), Some(vec![Some("2".into()), None]));
    assert_eq!(my_row(&[5, b'2']), None);
    assert_eq!(my_column_count(&[2]), Some(2));
    assert!(my_is_eof(&[0xfe, 0, 0, 2, 0]) && !my_is_eof(&[0x00]));
}

/// A PostgreSQL-protocol server that asks for the password in clear (its `password`
/// method): refused without --allow-cleartext-password, the password never sent; sent
/// with it.
#[test]
fn a_cleartext_password_is_sent_only_when_allowed() {
    let serve = |allow: bool| {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let srv = std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            let mut got = vec![];
            let mut b = [0u8; 1024];
            let n = c.read(&mut b).unwrap();
            got.extend_from_slice(&b[..n]);
            // AuthenticationCleartextPassword: 'R', length 8, code 3.
            c.write_all(&[b'R', 0, 0, 0, 8, 0, 0, 0, 3]).unwrap();
            if let Ok(n) = c.read(&mut b) {
                got.extend_from_slice(&b[..n]);
            }
            // AuthenticationOk, ReadyForQuery.
            let _ = c.write_all(&[b'R', 0, 0, 0, 8, 0, 0, 0, 0, b'Z', 0, 0, 0, 5, b'I']);
            got
        });
        let mut login = Login::new("probe", Some("pw-in-clear".into()), None).unwrap();
        login.allow_cleartext = allow;
        let r = DbConn::login(addr, DbProtocol::Postgres, &login);
        (r.err().map(|e| e.to_string()), srv.join().unwrap())
    };
    let (e, got) = serve(false);
    let e = e.expect("refused");
    assert!(
        e.contains("--allow-cleartext-password") && !e.contains("pw-in-clear"),
        "{e}"
    );
    assert!(
        !String::from_utf8_lossy(&got).contains("pw-in-clear"),
        "the password was sent"
    );
    let (e, got) = serve(true);
    assert_eq!(e, None);
    assert!(String::from_utf8_lossy(&got).contains("pw-in-clear"));
}
