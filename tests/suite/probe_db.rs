//! `tpslab probe idle --protocol` against real database servers from Debian, each with a
//! 2 s idle timeout of its own (3 s for haproxy's), on free loopback ports, configured and
//! kept in this test's folder, stopped by PID: the probes log in (PostgreSQL with
//! SCRAM-SHA-256, pgbouncer, MariaDB with mysql_native_password, Redis with HELLO 3 AUTH
//! and AUTH), the timeout is dated by the servers' own ends, the server is asked for its
//! own setting, and the report names the owner and the setting that governs it with its
//! value; no keepalive advice where keepalive was not shown to count. `probe pool
//! --protocol` through pgbouncer meets its client_idle_timeout. A wrong password, a
//! server that requires TLS, a cleartext password not allowed and an authentication
//! plugin not spoken are each refused in one line, exit 2, and no timeout is guessed.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

const REDIS: &str = "/usr/bin/redis-server";
const PGBOUNCER: &str = "/usr/sbin/pgbouncer";
const MARIADBD: &str = "/usr/sbin/mariadbd";
const MARIADB_INSTALL: &str = "/usr/bin/mariadb-install-db";
const HAPROXY: &str = "/usr/sbin/haproxy";
const PASSWORD: &str = "probe-pw-59";

/// A server stopped by its PID with SIGINT when dropped (PostgreSQL's fast shutdown),
/// then reaped.
struct Interrupt(Child);

impl Drop for Interrupt {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the PID of a child this test started and has not reaped.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGINT) };
        let _ = self.0.wait();
    }
}

/// A folder of this test's own, empty, readable by the servers' users.
fn folder(name: &str) -> PathBuf {
    let dir = common::tmp(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `cmd` run as `user` (setpriv execs: the child's PID is the server's).
fn as_user(user: &str, program: &str) -> Command {
    let mut c = Command::new("/usr/bin/setpriv");
    c.args([
        &format!("--reuid={user}"),
        &format!("--regid={user}"),
        "--clear-groups",
        "--",
        program,
    ]);
    c
}

fn chown(path: &Path, user: &str) {
    let ok = Command::new("chown")
        .args(["-R", user])
        .arg(path)
        .status()
        .unwrap();
    assert!(ok.success(), "chown {}", path.display());
}

/// `probe idle 127.0.0.1:PORT --protocol P` over idle intervals 1..max s, the password in
/// the environment: (its output, its report, the record's text).
fn probe(port: u16, args: &[&str], max_s: u64, dir: &Path, tag: &str) -> (Output, String, String) {
    let json = dir.join(format!("{tag}.json"));
    let mut c = common::tpslab();
    c.args(["probe", "idle", &format!("127.0.0.1:{port}")])
        .args(args)
        .args([
            "--min",
            "1s",
            "--max",
            &format!("{max_s}s"),
            "--resolution",
            "1s",
        ])
        .env("PROBE_PW", PASSWORD)
        .arg("--json")
        .arg(&json);
    let out = common::run(c);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let rec = std::fs::read_to_string(&json).unwrap_or_default();
    (out, text, rec)
}

/// What every report of a server's own timeout shows: success, the ends within
/// (lo_ms, hi_ms] of the connections' last data, the owner's line, no keepalive advice,
/// the password nowhere.
fn assert_timed(out: &Output, text: &str, rec: &str, (lo_ms, hi_ms): (u64, u64), owner: &str) {
    assert!(out.status.success(), "{text}");
    let j: serde_json::Value = serde_json::from_str(rec).unwrap();
    let (first, last) = (
        j["active_ends"]["first_ms"].as_u64().unwrap_or(0),
        j["active_ends"]["last_ms"].as_u64().unwrap_or(0),
    );
    assert!(
        first > lo_ms && last <= hi_ms,
        "ends {first}..{last} ms: {text}"
    );
    let line = text
        .lines()
        .find(|l| l.starts_with("Owner: "))
        .unwrap_or_else(|| panic!("no owner line: {text}"));
    assert!(line.starts_with(owner), "{line}");
    for no in ["tcp_keepalive_time =", "tcp_keepidle", "keepalive_time = "] {
        assert!(!text.contains(no), "{no:?} advised: {text}");
    }
    assert!(!rec.contains(PASSWORD) && !text.contains(PASSWORD));
    // Logged in, so the note about connections that never send is not printed.
    assert!(!text.contains("no application byte was sent"), "{text}");
}

/// `probe idle` with `args` (the password `pw` in PROBE_PW) refused: exit 2, one error
/// line containing `want`, no result, no record, the password nowhere.
fn assert_refused(port: u16, args: &[&str], pw: &str, dir: &Path, want: &str) {
    let json = dir.join("refused.json");
    let mut c = common::tpslab();
    c.args(["probe", "idle", &format!("127.0.0.1:{port}")])
        .args(args)
        .args(["--min", "1s", "--max", "4s"])
        .env("PROBE_PW", pw)
        .arg("--json")
        .arg(&json);
    let out = common::run(c);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains(want), "{err}");
    assert!(!err.contains(pw), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("Result:"));
    assert!(!json.exists(), "no record of a study that never ran");
}

/// The report's `Server setting:` line.
fn setting_line(text: &str) -> &str {
    text.lines()
        .find(|l| l.starts_with("Server setting: "))
        .unwrap_or_else(|| panic!("no server setting line: {text}"))
}

#[test]
fn redis_timeout_is_named_and_a_wrong_password_refused() {
    let test = "redis_timeout_is_named_and_a_wrong_password_refused";
    if !common::need(test, REDIS) {
        return;
    }
    let dir = folder("redis");
    let port = common::free_port();
    let conf = dir.join("redis.conf");
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\ntimeout 2\nrequirepass {PASSWORD}\nsave \"\"\nappendonly no\ndir {}\n\
             user probe on >{PASSWORD} ~* &* +@all\n",
            dir.display()
        ),
    )
    .unwrap();
    let _redis = common::Kill(
        Command::new(REDIS)
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server"),
    );
    common::wait_listening(port, "redis-server");
    // A named user logs in with HELLO 3 AUTH (RESP3 from then on).
    let (out, text, rec) = probe(
        port,
        &[
            "--protocol",
            "redis",
            "--user",
            "probe",
            "--password-env",
            "PROBE_PW",
        ],
        4,
        &dir,
        "redis",
    );
    // Redis looks at idle clients every 100 ms, timing them in whole seconds: 2..3 s;
    // its stated timeout settles it as Redis's, not a proxy's.
    assert_timed(
        &out,
        &text,
        &rec,
        (1900, 3200),
        "Owner: Redis (by the server's stated setting); governed by its timeout = 2 s (CONFIG GET timeout)",
    );
    let line = setting_line(&text);
    assert!(
        line.starts_with("Server setting: Redis states timeout = 2 s (CONFIG GET timeout); the connections ended in")
            && line.ends_with("the server's own timeout"),
        "{line}"
    );
    // Wrong passwords: one line, exit 2, no result, no record; by AUTH (the default
    // user) and by HELLO (a named one).
    let wrong = ["--protocol", "redis", "--password-env", "PROBE_PW"];
    let want = "could not log in as default (redis): AUTH: WRONGPASS";
    assert_refused(port, &wrong, "not-it", &dir, want);
    let wrong = [
        "--protocol",
        "redis",
        "--user",
        "probe",
        "--password-env",
        "PROBE_PW",
    ];
    let want = "could not log in as probe (redis): HELLO: WRONGPASS";
    assert_refused(port, &wrong, "not-it", &dir, want);
}

/// The newest PostgreSQL's bin folder of Debian's packages.
fn pg_bin() -> Option<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|b| b.join("initdb").exists() && b.join("psql").exists())
        .collect();
    v.sort();
    v.pop()
}

/// PostgreSQL (idle_session_timeout = 2s, SCRAM-SHA-256, TLS on) as the `postgres` user,
/// the role `long` exempt from the timeout, `tlsonly` allowed only over TLS (hostssl),
/// `clear` only by the cleartext `password` method; then pgbouncer (client_idle_timeout =
/// 2; the probe and a pool through it) and haproxy (timeout client/server 3s, data only)
/// in front of it. One instance for all: start-up is most of the cost.
#[test]
fn postgres_pgbouncer_and_a_proxy_are_each_named_with_their_setting() {
    let test = "postgres_pgbouncer_and_a_proxy_are_each_named_with_their_setting";
    let Some(bin) = pg_bin() else {
        common::skip(test, "/usr/lib/postgresql/*/bin/initdb not installed");
        return;
    };
    if !common::root(test, "to run PostgreSQL and pgbouncer as the postgres user")
        || !common::need(test, PGBOUNCER)
        || !common::need(test, HAPROXY)
    {
        return;
    }
    let dir = folder("postgres");
    let pw = dir.join("pw");
    std::fs::write(&pw, PASSWORD).unwrap();
    chown(&dir, "postgres");
    let data = dir.join("data");
    let ok = as_user("postgres", bin.join("initdb").to_str().unwrap())
        .arg("-D")
        .arg(&data)
        .args(["-U", "probe", "-A", "scram-sha-256", "--no-sync"])
        .arg(format!("--pwfile={}", pw.display()))
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(ok.success(), "initdb");
    std::fs::write(
        data.join("pg_hba.conf"),
        "local all all scram-sha-256\nhostssl all tlsonly 127.0.0.1/32 scram-sha-256\n\
         host all clear 127.0.0.1/32 password\nhost all probe,long 127.0.0.1/32 scram-sha-256\n",
    )
    .unwrap();
    // A certificate of its own, so that TLS is on and `tlsonly` can log in only with it.
    let ok = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-subj", "/CN=localhost", "-days", "2", "-keyout"])
        .arg(data.join("server.key"))
        .arg("-out")
        .arg(data.join("server.crt"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(ok.success(), "openssl req");
    // PostgreSQL refuses a key that group or others can read.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        data.join("server.key"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    chown(&data, "postgres");
    let port = common::free_port();
    let _pg = Interrupt(
        as_user("postgres", bin.join("postgres").to_str().unwrap())
            .arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1"])
            .arg("-c")
            .arg(format!("unix_socket_directories={}", dir.display()))
            .args([
                "-c",
                "idle_session_timeout=2s",
                "-c",
                "fsync=off",
                "-c",
                "ssl=on",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn postgres"),
    );
    common::wait_listening(port, "postgres");
    // A role the server's own timeout spares, for the proxy's to show. The TCP port
    // listens before the server's Unix socket exists and before it takes logins ("the
    // database system is starting up", seen on a busy host): asked again every 100 ms,
    // for 30 s at most.
    let run_psql = || {
        Command::new(bin.join("psql"))
            .args([
                "-h",
                dir.to_str().unwrap(),
                "-p",
                &port.to_string(),
                "-U",
                "probe",
                "-d",
                "postgres",
                "-q",
            ])
            .args([
                "-c",
                &format!("CREATE ROLE long LOGIN PASSWORD '{PASSWORD}'"),
                "-c",
                "ALTER ROLE long SET idle_session_timeout = 0",
                "-c",
                &format!("CREATE ROLE tlsonly LOGIN PASSWORD '{PASSWORD}'"),
                "-c",
                &format!("CREATE ROLE clear LOGIN PASSWORD '{PASSWORD}'"),
            ])
            .env("PGPASSWORD", PASSWORD)
            .output()
            .unwrap()
    };
    let mut psql = run_psql();
    for _ in 0..300 {
        let why = String::from_utf8_lossy(&psql.stderr);
        if psql.status.success()
            || !(why.contains("is starting up") || why.contains("No such file or directory"))
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        psql = run_psql();
    }
    assert!(
        psql.status.success(),
        "{}",
        String::from_utf8_lossy(&psql.stderr)
    );
    let login = |user: &'static str| {
        [
            "--protocol",
            "postgres",
            "--user",
            user,
            "--password-file",
            pw.to_str().unwrap(),
            "--database",
            "postgres",
        ]
        .map(String::from)
    };
    let args = login("probe");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (out, text, rec) = probe(port, &args, 4, &dir, "postgres");
    assert_timed(
        &out,
        &text,
        &rec,
        (1900, 2600),
        "Owner: PostgreSQL (named by the server's own goodbye); governed by idle_session_timeout",
    );
    assert!(text.contains("57P05"), "{text}");
    let line = setting_line(&text);
    assert!(
        line.starts_with("Server setting: PostgreSQL states idle_session_timeout = 2 s (SHOW idle_session_timeout); the connections ended in")
            && line.ends_with("the server's own idle_session_timeout"),
        "{line}"
    );
    // Refused in one line: TLS required (hostssl only), the password in clear not
    // allowed (the `password` method).
    let pw_arg = pw.to_str().unwrap();
    let role = |user: &'static str| {
        [
            "--protocol",
            "postgres",
            "--user",
            user,
            "--password-file",
            pw_arg,
            "--database",
            "postgres",
        ]
    };
    let want = "could not log in as tlsonly (postgres): server requires TLS; --protocol postgres has no TLS yet (it said: FATAL: no pg_hba.conf entry";
    assert_refused(port, &role("tlsonly"), PASSWORD, &dir, want);
    let want = "could not log in as clear (postgres): the server asks for the password in clear";
    assert_refused(port, &role("clear"), PASSWORD, &dir, want);
    // Allowed, it is sent: a wrong one is then the server's refusal.
    let clear = [
        "--protocol",
        "postgres",
        "--user",
        "clear",
        "--password-env",
        "PROBE_PW",
    ];
    let clear = [
        &clear[..],
        &["--database", "postgres", "--allow-cleartext-password"],
    ]
    .concat();
    let want = "could not log in as clear (postgres): FATAL: password authentication failed for user \"clear\"";
    assert_refused(port, &clear, "not-it", &dir, want);

    // pgbouncer in session mode, client_idle_timeout = 2, its own SCRAM with the client.
    let bport = common::free_port();
    let bdir = dir.join("pgbouncer");
    std::fs::create_dir_all(&bdir).unwrap();
    std::fs::write(
        bdir.join("userlist.txt"),
        format!("\"probe\" \"{PASSWORD}\"\n\"long\" \"{PASSWORD}\"\n"),
    )
    .unwrap();
    std::fs::write(
        bdir.join("pgbouncer.ini"),
        format!(
            "[databases]\npostgres = host=127.0.0.1 port={port} dbname=postgres\n[pgbouncer]\n\
             listen_addr = 127.0.0.1\nlisten_port = {bport}\nunix_socket_dir =\n\
             auth_type = scram-sha-256\nauth_file = {}/userlist.txt\npool_mode = session\n\
             client_idle_timeout = 2\nlogfile = {}/log\n",
            bdir.display(),
            bdir.display()
        ),
    )
    .unwrap();
    chown(&bdir, "postgres");
    let _bouncer = common::Kill(
        as_user("postgres", PGBOUNCER)
            .arg(bdir.join("pgbouncer.ini"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn pgbouncer"),
    );
    common::wait_listening(bport, "pgbouncer");
    // As the role PostgreSQL does not time out: pgbouncer's own timeout alone.
    let long = login("long");
    let long: Vec<&str> = long.iter().map(String::as_str).collect();
    let (out, text, rec) = probe(bport, &long, 4, &dir, "pgbouncer");
    // pgbouncer's janitor looks at idle clients a few times a second.
    assert_timed(
        &out,
        &text,
        &rec,
        (1900, 3000),
        "Owner: pgbouncer (named by the server's own goodbye); governed by client_idle_timeout",
    );
    // SHOW goes through pgbouncer to PostgreSQL, whose setting for this role is off.
    let line = setting_line(&text);
    assert!(
        line.starts_with("Server setting: PostgreSQL states idle_session_timeout = 0 (off)")
            && line.contains("something in the path (a proxy, the pooler) ended them"),
        "{line}"
    );

    // A pool through pgbouncer logging in as the probe did: its connection idle 1.75 s
    // answers, the one idle 3.5 s meets client_idle_timeout (pgbouncer's goodbye kept),
    // and the stated 2 s agrees (no DISAGREES line).
    let json = dir.join("pool.json");
    let mut c = common::tpslab();
    c.args(["probe", "pool", &format!("127.0.0.1:{bport}")])
        .args(&long)
        .args([
            "--path-idle-timeout",
            "2s",
            "--min-idle",
            "2",
            "--requests",
            "2",
        ])
        .args([
            "--request-every",
            "1750ms",
            "--query-timeout",
            "1s",
            "--json",
        ])
        .arg(&json);
    let out = common::run(c);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let q = &r["requests"];
    assert!(q[0]["outcome"]["answered"].is_object(), "{text}");
    assert_eq!(q[1]["outcome"]["failed"], "EOF", "{text}");
    assert!(
        q[1]["goodbye"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("client_idle_timeout"),
        "{text}"
    );
    assert!(text.contains("Result: 1 of 2 requests failed, each on a connection idle longer than the path's 2.0 s"), "{text}");
    assert!(!text.contains("DISAGREES"), "{text}");
    assert!(
        !text.contains(PASSWORD) && !std::fs::read_to_string(&json).unwrap().contains(PASSWORD)
    );

    // haproxy in TCP mode in front of PostgreSQL, as the role the server does not time
    // out: a FIN without an ErrorResponse is the proxy's.
    let hport = common::free_port();
    let cfg = dir.join("haproxy.cfg");
    std::fs::write(
        &cfg,
        format!(
            "global\n    maxconn 100\ndefaults\n    mode tcp\n    timeout connect 2s\n\
             timeout client 3s\n    timeout server 3s\nfrontend f\n    bind 127.0.0.1:{hport}\n\
             default_backend b\nbackend b\n    server s1 127.0.0.1:{port}\n"
        ),
    )
    .unwrap();
    let _proxy = common::Kill(
        Command::new(HAPROXY)
            .arg("-f")
            .arg(&cfg)
            .arg("-db")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn haproxy"),
    );
    common::wait_listening(hport, "haproxy");
    let (out, text, rec) = probe(hport, &long, 5, &dir, "haproxy");
    assert_timed(
        &out,
        &text,
        &rec,
        (2900, 3600),
        "Owner: a proxy on the path; governed by its idle timeout (haproxy timeout client/server",
    );
    assert!(
        setting_line(&text)
            .starts_with("Server setting: PostgreSQL states idle_session_timeout = 0 (off)"),
        "{text}"
    );
}

#[test]
fn mariadb_wait_timeout_is_named() {
    let test = "mariadb_wait_timeout_is_named";
    if !common::need(test, MARIADBD)
        || !common::need(test, MARIADB_INSTALL)
        || !common::root(test, "to run mariadbd as the mysql user")
    {
        return;
    }
    let dir = folder("mariadb");
    let data = dir.join("data");
    let init = dir.join("init.sql");
    std::fs::write(
        &init,
        format!(
            "CREATE USER IF NOT EXISTS 'probe'@'%' IDENTIFIED BY '{PASSWORD}';\n\
             INSTALL SONAME 'auth_ed25519';\n\
             CREATE USER IF NOT EXISTS 'edu'@'%' IDENTIFIED VIA ed25519 USING PASSWORD('{PASSWORD}');\n"
        ),
    )
    .unwrap();
    let ok = Command::new(MARIADB_INSTALL)
        .args([
            "--no-defaults",
            "--user=mysql",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
        ])
        .arg(format!("--datadir={}", data.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(ok.success(), "mariadb-install-db");
    chown(&dir, "mysql");
    let port = common::free_port();
    let _db = common::Kill(
        Command::new(MARIADBD)
            .args([
                "--no-defaults",
                "--user=mysql",
                "--bind-address=127.0.0.1",
                "--skip-log-bin",
            ])
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--port={port}"))
            .arg(format!("--socket={}/sock", dir.display()))
            .arg(format!("--pid-file={}/pid", dir.display()))
            .arg(format!("--init-file={}", init.display()))
            .args(["--wait-timeout=2", "--innodb-buffer-pool-size=8M"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn mariadbd"),
    );
    common::wait_listening(port, "mariadbd");
    let args = [
        "--protocol",
        "mysql",
        "--user",
        "probe",
        "--password-env",
        "PROBE_PW",
    ];
    let (out, text, rec) = probe(port, &args, 4, &dir, "mariadb");
    assert_timed(
        &out,
        &text,
        &rec,
        (1900, 2600),
        "Owner: MariaDB (by the server's stated setting); governed by its wait_timeout = 2 s (SELECT @@wait_timeout)",
    );
    let line = setting_line(&text);
    assert!(
        line.starts_with("Server setting: MariaDB/MySQL states wait_timeout = 2 s (SELECT @@wait_timeout); the connections ended in")
            && line.ends_with("the server's own wait_timeout"),
        "{line}"
    );
    // A user of a plugin the probe does not speak: one line naming it.
    let ed = [
        "--protocol",
        "mysql",
        "--user",
        "edu",
        "--password-env",
        "PROBE_PW",
    ];
    let want =
        "could not log in as edu (mysql): authentication plugin client_ed25519 not supported";
    assert_refused(port, &ed, PASSWORD, &dir, want);
}
