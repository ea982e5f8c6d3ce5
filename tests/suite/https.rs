//! `load http` and `ramp http` over TLS (`https://`) against Debian's nginx with a
//! self-signed certificate made by the test (openssl CLI): trusted by `--cacert` the
//! requests succeed; by a wrong CA every connect fails, counted as TLS errors; with
//! `--insecure` they succeed and the report says nothing was verified; a `--cacert` that
//! holds no certificate is one line, exit 2.

use crate::common;

use serde_json::Value;
use std::path::Path;

/// `tpslab load http URL ARGS --json`: its exit code, stdout, stderr and record (the
/// terminal output reproduced by `tpslab report` from it when the run succeeded).
use common::load_http as load;

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

const LOAD: &[&str] = &["--rate", "500", "--connections", "4", "--duration", "1s"];

#[test]
fn load_http_over_tls_trusts_its_cacert_fails_a_wrong_ca_and_says_insecure() {
    let tag = "load_http_over_tls";
    let Some((_nginx, port, ca)) = common::nginx_tls(tag, false) else {
        return;
    };
    let ca = ca.to_str().unwrap().to_string();
    // The name verified is the URL's host (SNI): localhost is in the certificate.
    let url = format!("https://localhost:{port}/index.html");
    let args = [LOAD, &["--cacert", &ca]].concat();
    // A generator a busy host held back past the run's end sends fewer than planned (the
    // plan ends on time; 499 of 500 beside stress-ng --cpu 2): retried up to 3 times, then
    // counted as spoiled.
    let Some((code, out, err, r)) = common::retry(
        "https::load_http_over_tls_trusts_its_cacert_fails_a_wrong_ca_and_says_insecure",
        3,
        || {
            let got = load(&url, &args, "https-cacert");
            assert_eq!(got.0, Some(0), "{}", got.2);
            common::plan_sent(&got.3)?;
            Ok(got)
        },
    ) else {
        return;
    };
    assert_eq!(code, Some(0), "{err}");
    let res = &r["result"];
    assert_eq!(n(&res["sent"]), 500, "{res}");
    assert_eq!(n(&res["status"]["s2xx"]), 500, "{res}");
    assert_eq!(n(&res["errors"]["other"]), 0, "{res}");
    // Keep-alive: each connection made once.
    assert_eq!(n(&res["connections"]), 4, "{res}");
    // Plaintext bytes: 500 nginx replies with their 12-byte body.
    assert!(n(&res["bytes_in"]) > 500 * 12, "{res}");
    assert_eq!(r["plan"]["request"]["tls"]["cacert"], ca.as_str());
    assert!(
        out.contains(&format!("TLS verified by --cacert {ca}")),
        "{out}"
    );

    // A wrong CA: no request goes; the connects fail in the handshake, as TLS.
    let other = Path::new(&ca).with_file_name("other.pem");
    let args = [LOAD, &["--cacert", other.to_str().unwrap()]].concat();
    let (code, _, err, r) = load(&url, &args, "https-wrong-ca");
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(
        err.lines().filter(|l| l.contains("error")).count(),
        1,
        "{err}"
    );
    assert!(err.contains("no request answered"), "{err}");
    let res = &r["result"];
    assert_eq!(n(&res["sent"]), 0, "{res}");
    assert!(n(&res["connect_errors"]["tls"]) > 0, "{res}");
    assert!(
        res.get("errors").is_some_and(|e| e.get("tls").is_none()),
        "{res}"
    );
    assert!(err.contains("connects failed: tls "), "{err}");
    // Why, in the error line and the record: the first TLS failure's text.
    assert!(
        err.contains("first TLS failure: tls: invalid peer certificate: UnknownIssuer"),
        "{err}"
    );
    assert_eq!(
        res["first_tls_error"], "tls: invalid peer certificate: UnknownIssuer",
        "{res}"
    );

    // --insecure: any certificate, any name (127.0.0.1 is in it, "other" is not needed).
    let url = format!("https://127.0.0.1:{port}/index.html");
    let args = [LOAD, &["--insecure"]].concat();
    let (code, out, err, r) = load(&url, &args, "https-insecure");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(n(&r["result"]["status"]["s2xx"]), 500, "{}", r["result"]);
    assert!(out.contains("TLS NOT VERIFIED (--insecure)"), "{out}");
    assert_eq!(r["plan"]["request"]["tls"]["insecure"], true);

    // Plain HTTP to the TLS port: nginx answers 400 (a reply of class 4xx) and closes.
    let (code, _, err, r) = load(
        &format!("http://127.0.0.1:{port}/"),
        LOAD,
        "https-plain-to-tls",
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(n(&r["result"]["status"]["s4xx"]), 500, "{}", r["result"]);
}

#[test]
fn ramp_http_over_tls() {
    let tag = "ramp_http_over_tls";
    let Some((_nginx, port, ca)) = common::nginx_tls(tag, false) else {
        return;
    };
    let json = common::tmp("https-ramp.json");
    let _ = std::fs::remove_file(&json);
    let mut c = common::tpslab();
    c.args(["ramp", "http", &format!("https://localhost:{port}/")])
        .args(["--users", "1..4", "--step", "x2", "--step-duration", "1s"])
        .args(["--warmup", "200ms", "--cacert", ca.to_str().unwrap()])
        .arg("--json")
        .arg(&json);
    let out = common::run(c);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    common::assert_report_reproduces(&json, &out.stdout);
    assert!(stdout.contains("TLS verified by --cacert"), "{stdout}");
    let rec = common::record(&json);
    let steps = rec["steps"]
        .as_array()
        .unwrap_or_else(|| panic!("steps: {rec}"));
    assert_eq!(steps.len(), 3);
    for s in steps {
        assert!(s["tps"].as_f64().unwrap() > 100.0, "{s}");
        assert!(s["errors"].as_object().unwrap().is_empty(), "{s}");
    }
}

#[test]
fn a_cacert_without_a_certificate_is_one_line_exit_2() {
    let key = common::tmp("https-not-a-cert.pem");
    std::fs::write(&key, "hello\n").unwrap();
    for cmd in [&["load", "http"][..], &["ramp", "http"][..]] {
        let mut c = common::tpslab();
        c.args(cmd)
            .args(["https://localhost:1/", "--cacert"])
            .arg(&key);
        if cmd[0] == "load" {
            c.args(["--rate", "1"]);
        }
        let out = common::run(c);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("--cacert") && err.contains("no certificate"),
            "{err}"
        );
    }
}
