//! `load http --http3` against a second, independent HTTP/3 implementation: aioquic
//! (Python; tests/servers/h3_aioquic.py), in a virtual environment .ci/run makes.

use crate::common;
use crate::http3::{counts, quic_request_path_balances};

/// The Python interpreter of a virtual environment holding aioquic (.ci/run makes it);
/// `TPSLAB_AIOQUIC_PYTHON` names another.
fn aioquic_python() -> String {
    std::env::var("TPSLAB_AIOQUIC_PYTHON")
        .unwrap_or_else(|_| "/opt/tpslab-ci/aioquic/bin/python3".into())
}

/// A second, independent HTTP/3 implementation: aioquic (Python) in
/// tests/servers/h3_aioquic.py, started by `load http --http3 --server-cmd` in a network
/// namespace of the test's own. Every request is answered (its 503 path counted as
/// failed), its QUIC socket is found by the URL's address with the interpreter's
/// executable and no known stack, every datagram quinn sent is accounted for by the
/// socket's drops and the server thread's reads, and the socket that never set its
/// buffer is said to hold net.core.rmem_default as it is (not twice it, which is what
/// the kernel grants one that asks for the default).
#[test]
fn aioquic_is_loaded_found_by_address_and_its_datagrams_accounted() {
    // Alone: a one-thread Python server whose every datagram is accounted for, beside
    // other tests on 2 CPUs, could fall behind for reasons of theirs.
    let _g = common::serial();
    const T: &str = "http3_aioquic::aioquic_is_loaded_found_by_address_and_its_datagrams_accounted";
    let python = aioquic_python();
    if !common::need(T, &python)
        || !common::need(T, "/usr/bin/openssl")
        || !common::root(
            T,
            "the server thread's reads are counted by perf tracepoints",
        )
        || !common::can_netns(T)
    {
        return;
    }
    let ns = common::NetNs::new();
    let dir = common::tmp("http3-aioquic");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    common::self_signed(&dir);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/servers/h3_aioquic.py");
    let d = dir.display();
    let server_cmd = format!("exec {python} {script} {{port}} {d}/cert.pem {d}/cert.key");
    let port = common::free_port();
    let run = |path: &str, tag: &str| {
        let json = dir.join(format!("{tag}.json"));
        let out = common::run({
            let mut c = ns.tpslab();
            c.args([
                "load",
                "http",
                &format!("https://localhost:{port}{path}"),
                "--http3",
                "--cacert",
            ])
            .arg(dir.join("cert.pem"))
            .args([
                "--rate",
                "300",
                "--connections",
                "2",
                "--streams",
                "2",
                "--duration",
                "1s",
                "--server-cmd",
                &server_cmd,
                "--json",
            ])
            .arg(&json);
            c
        });
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        (out.status.code(), text, err, common::record(&json))
    };
    let (code, out, err, rec) = run("/", "ok");
    assert_eq!(code, Some(0), "{out}\n{err}");
    let (sent, ok, errors, unanswered) = counts(&rec);
    assert!(sent >= 250, "{out}");
    assert_eq!((ok, errors, unanswered), (sent, 0, 0), "{out}");
    let r = &rec["result"];
    let u = &r["server_udp"];
    assert_eq!(u["address"], format!("127.0.0.1:{port}"), "{u}");
    assert!(
        u["target"]["exe"].as_str().unwrap().contains("python"),
        "{u}"
    );
    assert!(u["stack"].is_null(), "{u}");
    let datagrams = quic_request_path_balances(&rec);
    assert!(datagrams >= sent, "{u}");
    // The socket never set SO_RCVBUF: it holds rmem_default as the namespace has it.
    let granted = u["observer"]["target_rcvbuf_bytes"][0].as_u64().unwrap();
    assert_eq!(u["rmem_default"].as_u64(), Some(granted), "{u}");
    assert!(
        out.contains("Asked: nothing (SO_RCVBUF is net.core.rmem_default ")
            && out.contains(&format!(
                " ({granted} B), what a socket that never set its buffer holds)"
            )),
        "{out}"
    );

    // Its 503s: every request answered and counted failed, and that is the verdict's
    // headline even when a few requests went late (it once said "limited by the
    // generator: 6 requests went over 1 ms late" of 300 all answered 503).
    let (code, out, err, rec) = run("/busy", "busy");
    assert_eq!(code, Some(0), "{out}\n{err}");
    let r = &rec["result"];
    let sent = r["sent"].as_u64().unwrap();
    assert_eq!(r["status"]["s5xx"].as_u64(), Some(sent), "{out}");
    assert!(
        out.contains(&format!(
            "\nVERDICT: limited by the server's answers: {} sends held back by a late reply on their connection, {sent} of {sent} requests failed or answered 4xx/5xx",
            r["late"].as_u64().unwrap().saturating_sub(r["behind"].as_u64().unwrap())
        )),
        "{out}"
    );
}
