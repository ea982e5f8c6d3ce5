//! Shared helpers for integration tests: private network namespaces and running tpslab.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The list of skipped tests, one line each, that `.ci/run` prints after the suite (a
/// skipped test shows as "ok" in cargo's output; this is where it is counted):
/// $TPSLAB_SKIP_LIST, else target/tmp/tpslab-skipped.txt; a test's own list while it set
/// one with [`own_skip_list`] (on its thread).
pub fn skip_list() -> PathBuf {
    if let Some(p) = OWN_SKIP_LIST.with(|l| l.borrow().clone()) {
        return p;
    }
    std::env::var_os("TPSLAB_SKIP_LIST").map_or_else(
        || PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tpslab-skipped.txt"),
        PathBuf::from,
    )
}

thread_local! {
    static OWN_SKIP_LIST: std::cell::RefCell<Option<PathBuf>> = const { std::cell::RefCell::new(None) };
}

/// Skips of this thread's test go to `list` instead of the suite's (a test of the skip
/// list itself; every test shares one process, so the environment cannot be changed).
pub fn own_skip_list(list: &std::path::Path) {
    OWN_SKIP_LIST.with(|l| *l.borrow_mut() = Some(list.to_path_buf()));
}

/// Where [`retry`] notes each spoiled attempt: beside this thread's own skip list
/// (`LIST.retries`) when its test set one, else `$TPSLAB_TEST_RETRIES` (test.sh's), else
/// nowhere.
pub fn retries_file() -> Option<PathBuf> {
    if let Some(p) = OWN_SKIP_LIST.with(|l| l.borrow().clone()) {
        let mut p = p.into_os_string();
        p.push(".retries");
        return Some(PathBuf::from(p));
    }
    std::env::var_os("TPSLAB_TEST_RETRIES").map(PathBuf::from)
}

/// The name a test goes by in the lists: libtest's name of the test's thread
/// (`module::test_name`) when `test` is that or its last part (tests pass their own name,
/// some without the module), else `test` (a thread the test spawned has no such name).
pub fn full_name(test: &str) -> String {
    match std::thread::current().name() {
        Some(n) if n == test || n.ends_with(&format!("::{test}")) => n.to_owned(),
        _ => test.to_owned(),
    }
}

/// Skips a test: prints why and adds it to [`skip_list`] under its [`full_name`].
pub fn skip(test: &str, why: &str) {
    let test = &full_name(test);
    eprintln!("skipping {test}: {why}");
    use std::io::Write;
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(skip_list())
    {
        // One write per line: parallel tests never interleave theirs.
        let _ = f.write_all(format!("{test}: {why}\n").as_bytes());
    }
}

mod retry;
pub use retry::{cpu_pressure_pct, plan_sent, retry, retry_chance, Neighbour};

/// Whether `path` exists; otherwise the test is skipped with the reason.
pub fn need(test: &str, path: &str) -> bool {
    turn::ordinary();
    let ok = std::path::Path::new(path).exists();
    if !ok {
        skip(test, &format!("{path} not installed"));
    }
    ok
}

/// Whether the tests run as root (to read another process's /proc/PID/task/TID/syscall,
/// which needs ptrace access). Skips (counted) when not.
#[allow(dead_code)]
pub fn root(test: &str, why: &str) -> bool {
    turn::ordinary();
    // SAFETY: geteuid has no memory effects.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        skip(test, &format!("needs root {why}"));
    }
    root
}

/// Whether the tests can create network namespaces (root). Skips (counted) when not.
pub fn can_netns(test: &str) -> bool {
    turn::ordinary();
    // SAFETY: geteuid has no memory effects.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        skip(test, "needs root to create a network namespace");
    }
    root
}

/// A network namespace with `lo` up, deleted on drop (also when a test fails).
pub struct NetNs {
    pub name: String,
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

impl NetNs {
    pub fn new() -> NetNs {
        turn::ordinary();
        let name = format!(
            "tpslab-t{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let ok = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .expect("run ip");
        assert!(ok.success(), "ip netns add {name} failed");
        let ns = NetNs { name };
        let ok = Command::new("ip")
            .args(["-n", &ns.name, "link", "set", "lo", "up"])
            .status()
            .expect("run ip");
        assert!(ok.success(), "lo up in {} failed", ns.name);
        ns
    }

    /// A command that runs `program` inside the namespace.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// A command that runs tpslab inside the namespace (its history in [`history_home`]).
    pub fn tpslab(&self) -> Command {
        let mut c = self.command(env!("CARGO_BIN_EXE_tpslab"));
        c.env("XDG_DATA_HOME", history_home());
        free_of_host_lock(&mut c);
        c
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

pub mod turn;
pub use turn::{quiet, serial};

/// tpslab outside any namespace (its history in [`history_home`]; without
/// `TPSLAB_HOST_LOCK` when this thread holds [`host_lock`]).
pub fn tpslab() -> Command {
    turn::ordinary();
    let mut c = Command::new(env!("CARGO_BIN_EXE_tpslab"));
    c.env("XDG_DATA_HOME", history_home());
    free_of_host_lock(&mut c);
    c
}

thread_local! {
    static HOLDS_HOST_LOCK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The suite's host lock, held while a test changes host-wide state (sysctls, packages,
/// users) or checks it unchanged: an exclusive `flock` on `$TPSLAB_HOST_LOCK` (test.sh
/// sets it to one path for every test binary and every clone's suite on this host), else
/// /tmp/tpslab-host-settings.lock. tpslab waits for the same lock before it changes a
/// setting; the tpslab this thread starts through [`tpslab`] or [`NetNs::tpslab`] runs
/// without the variable (the test holds the lock for it; a command built otherwise
/// takes [`free_of_host_lock`]; a tpslab started from another thread would wait for its
/// own test). Take it after [`serial`], never before: another test may hold `serial()` while its
/// tpslab waits for this lock (it takes the ordinary turn first, [`turn`]).
pub struct HostLock {
    _file: std::fs::File,
}

#[allow(dead_code)]
pub fn host_lock() -> HostLock {
    turn::ordinary();
    let path = std::env::var_os("TPSLAB_HOST_LOCK").map_or_else(
        || PathBuf::from("/tmp/tpslab-host-settings.lock"),
        PathBuf::from,
    );
    let f = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("open the host lock {}: {e}", path.display()));
    f.lock()
        .unwrap_or_else(|e| panic!("lock {}: {e}", path.display()));
    HOLDS_HOST_LOCK.with(|h| h.set(true));
    HostLock { _file: f }
}

impl Drop for HostLock {
    fn drop(&mut self) {
        HOLDS_HOST_LOCK.with(|h| h.set(false));
    }
}

/// `c` without `TPSLAB_HOST_LOCK` when this thread holds [`host_lock`] (its tpslab would
/// otherwise wait for the lock its own test holds).
pub fn free_of_host_lock(c: &mut Command) {
    if HOLDS_HOST_LOCK.with(|h| h.get()) {
        c.env_remove("TPSLAB_HOST_LOCK");
    }
}

/// Where the tests' tpslab keeps its history (XDG_DATA_HOME): under this test process's
/// temporary folder, never the user's own.
pub fn history_home() -> PathBuf {
    tmp("xdg-data")
}

/// Runs and returns the output, printing it for the test log.
pub fn run(mut c: Command) -> Output {
    turn::ordinary();
    let out = c.output().expect("spawn");
    eprintln!("--- stdout\n{}", String::from_utf8_lossy(&out.stdout));
    eprintln!("--- stderr\n{}", String::from_utf8_lossy(&out.stderr));
    out
}

/// A temporary file path unique to this test process and module, under cargo's target/tmp (not
/// /tmp). The folders of test processes that have ended are removed on first use, so a
/// run leaves at most its own behind.
pub fn tmp(name: &str) -> std::path::PathBuf {
    turn::ordinary();
    static CLEAN: std::sync::Once = std::sync::Once::new();
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    CLEAN.call_once(|| {
        for e in std::fs::read_dir(&base).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if let Some(pid) = name.strip_prefix("tpslab-test-") {
                if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
    });
    // One folder per test module (every module shares this process: two modules' files
    // of one name must not meet): the module of the test thread ("ledger::a_test"); on a
    // thread a test spawned, the module whose test last asked from its own thread (with
    // tests on several threads that may be another running module's: a spawned thread's
    // files need names of their own), else "common".
    static LAST: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());
    let module = match std::thread::current()
        .name()
        .and_then(|n| n.split_once("::"))
    {
        Some((m, _)) => {
            *LAST.lock().unwrap_or_else(|e| e.into_inner()) = m.to_string();
            m.to_string()
        }
        None => {
            let last = LAST.lock().unwrap_or_else(|e| e.into_inner()).clone();
            if last.is_empty() {
                "common".to_string()
            } else {
                last
            }
        }
    };
    let dir = base
        .join(format!("tpslab-test-{}", std::process::id()))
        .join(module);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Reads a JSON run record.
pub fn record(path: &std::path::Path) -> serde_json::Value {
    turn::ordinary();
    let s = std::fs::read_to_string(path).expect("record written");
    serde_json::from_str(&s).expect("valid JSON")
}

/// `tpslab report FILE` prints what the command printed (its stdout: status lines such as
/// "record written to" go to stderr), byte for byte, and `--format json` gives the file
/// back byte for byte: the record holds everything the report shows.
#[allow(dead_code)]
pub fn assert_report_reproduces(path: &std::path::Path, stdout: &[u8]) {
    assert_report_reproduces_after(path, stdout, 0)
}

/// The same after the first `live` lines of stdout, printed while the command ran (what
/// `watch` follows) and not part of the report.
#[allow(dead_code)]
pub fn assert_report_reproduces_after(path: &std::path::Path, stdout: &[u8], live: usize) {
    let printed = String::from_utf8_lossy(stdout);
    let body: String = printed.split_inclusive('\n').skip(live).collect();
    assert!(
        !body.lines().any(|l| l.starts_with("record written to ")
            || l.starts_with("plot: ")
            || l.starts_with("tpslab: ")),
        "a status line on standard output: {body}"
    );
    let body = body.as_str();
    let mut c = tpslab();
    c.arg("report").arg(path);
    let out = c.output().expect("spawn tpslab report");
    assert!(
        out.status.success(),
        "tpslab report: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let again = String::from_utf8_lossy(&out.stdout);
    if again != body {
        let first = again
            .lines()
            .zip(body.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(again.lines().count().min(body.lines().count()));
        panic!(
            "tpslab report differs from the run's output at line {}:\n  run:    {:?}\n  report: {:?}",
            first + 1,
            body.lines().nth(first),
            again.lines().nth(first)
        );
    }
    let mut c = tpslab();
    c.args(["report", "--format", "json"]).arg(path);
    let out = c.output().expect("spawn tpslab report --format json");
    assert!(
        out.status.success(),
        "tpslab report --format json: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = std::fs::read(path).expect("record written");
    assert!(
        out.stdout == file,
        "tpslab report --format json does not give the record back byte for byte"
    );
}

/// A ledger path's row count by layer key.
pub fn row(path: &serde_json::Value, layer: &str) -> u64 {
    path["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["layer"] == layer)
        .map(|r| r["count"].as_u64().unwrap())
        .sum()
}

/// Sum of a ledger path's rows plus its unattributed count (panics when unknown).
pub fn path_total(path: &serde_json::Value) -> i64 {
    let rows: i64 = path["rows"]
        .as_array()
        .expect("ledger rows")
        .iter()
        .map(|r| r["count"].as_u64().expect("row count") as i64)
        .sum();
    rows + path["unattributed"].as_i64().expect("unattributed known")
}

/// Debian's dnsmasq.
pub const DNSMASQ: &str = "/usr/sbin/dnsmasq";

/// Arguments of a foreground dnsmasq answering `name` A 127.0.0.1 on 127.0.0.1:`port`
/// only, with no configuration, upstreams or query log.
pub fn dnsmasq_args(port: u16, name: &str) -> Vec<String> {
    [
        "--keep-in-foreground",
        "--conf-file=/dev/null",
        "--no-resolv",
        "--no-hosts",
        "--no-poll",
        "--pid-file=",
        "--user=root",
        "--group=root",
        "--log-facility=-",
        "--listen-address=127.0.0.1",
        "--bind-interfaces",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([
        format!("--port={port}"),
        format!("--address=/{name}/127.0.0.1"),
    ])
    .collect()
}

/// A DNS query: 12-byte header (id 0, flags 0x0100 = RD, qdcount 1), QNAME labels, root
/// label, QTYPE A (1), QCLASS IN (1).
pub fn dns_query(name: &str) -> Vec<u8> {
    let mut q = vec![0, 0, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in name.split('.') {
        assert!(!label.is_empty() && label.len() < 64);
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.push(0);
    q.extend_from_slice(&[0, 1, 0, 1]);
    q
}

/// A server process started in a namespace with `ip netns exec` (which execs, so the
/// child's PID is the server's). Killed by its PID on drop, also when the test fails.
/// Declare it after the namespace so it is dropped first.
pub struct Server {
    pub child: Child,
    log: PathBuf,
    what: String,
}

impl Server {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Spawns `cmd` (stdout and stderr to a log file), then waits until the process is
    /// `comm` and has a UDP socket bound to 127.0.0.1:`port` in its namespace.
    pub fn start(mut cmd: Command, what: &str, tag: &str, comm: &str, port: u16) -> Server {
        let log = tmp(&format!("{tag}.log"));
        let file = std::fs::File::create(&log).expect("server log file");
        cmd.stdin(Stdio::null())
            .stdout(file.try_clone().expect("clone log file"))
            .stderr(file);
        let child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {what}: {e}"));
        let mut s = Server {
            child,
            log,
            what: what.to_string(),
        };
        s.wait_ready(comm, port);
        s
    }

    fn wait_ready(&mut self, comm_want: &str, port: u16) {
        let pid = self.pid();
        let want = format!("0100007F:{port:04X}");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(st) = self.child.try_wait().expect("try_wait server") {
                panic!(
                    "{} exited early ({st}); its log:\n{}",
                    self.what,
                    self.log()
                );
            }
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            let udp = std::fs::read_to_string(format!("/proc/{pid}/net/udp")).unwrap_or_default();
            if comm.trim() == comm_want && udp.lines().any(|l| l.contains(&want)) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{} (pid {pid}, comm {comm:?}) not listening on 127.0.0.1:{port} after 10 s; \
                 /proc/{pid}/net/udp:\n{udp}\nits log:\n{}",
                self.what,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Child::kill signals this child's PID only.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A child process killed (by its PID) and reaped when dropped, also when a test fails.
#[allow(dead_code)]
pub struct Kill(pub Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A child process stopped by its PID when dropped: SIGTERM (which stress-ng passes to
/// its workers, and after which tpslab writes its record), then reaped.
#[allow(dead_code)]
pub struct Stopped(pub Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

/// `cd DIR && python3 udp_server.py {port} 0 DIR 2>&1 | tee DIR/log`: a command that needs
/// a shell (cd, &&, a pipeline), whose every process (sh, python3, tee) names the folder
/// DIR, unique to this test, on its command line.
pub fn pipeline_cmd(dir: &std::path::Path) -> String {
    std::fs::create_dir_all(dir).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/servers/udp_server.py");
    let d = dir.display();
    format!("cd {d} && python3 {script} {{port}} 0 {d} 2>&1 | tee {d}/log")
}

/// PIDs of the live (not zombie) processes whose command line contains `mark`.
pub fn live_with(mark: &str) -> Vec<u32> {
    let mut v = vec![];
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let zombie = stat
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'));
        if !zombie && String::from_utf8_lossy(&cmdline).contains(mark) {
            v.push(pid);
        }
    }
    v
}

/// A port free on 127.0.0.1 when asked (the kernel's pick for a listener closed at once).
#[allow(dead_code)]
pub fn free_port() -> u16 {
    turn::ordinary();
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Waits (at most 10 s) until 127.0.0.1:`port` accepts a connection.
#[allow(dead_code)]
pub fn wait_listening(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{what} not listening on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// nginx in the foreground (one process, no daemon) with a configuration in a folder of
/// this test's own (`-p`): index.html ("hello world\n") at /, 503 at /busy. Killed by PID.
#[allow(dead_code)]
pub fn nginx(tag: &str) -> Option<(Kill, u16)> {
    nginx_listening(tag, "")
}

/// [`nginx`] speaking HTTP/2 over plain TCP (h2c, prior knowledge) on its port.
#[allow(dead_code)]
pub fn nginx_h2c(tag: &str) -> Option<(Kill, u16)> {
    nginx_listening(tag, " http2")
}

/// [`nginx`] with `listen_opts` after its address (e.g. ` http2`).
fn nginx_listening(tag: &str, listen_opts: &str) -> Option<(Kill, u16)> {
    if !need(tag, "/usr/sbin/nginx") {
        return None;
    }
    let dir: PathBuf = tmp(&format!("nginx-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("html")).unwrap();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    std::fs::write(dir.join("html/index.html"), "hello world\n").unwrap();
    let port = free_port();
    let d = dir.display();
    std::fs::write(
        dir.join("nginx.conf"),
        format!(
            "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
             error_log {d}/logs/error.log;\nevents {{ worker_connections 1024; }}\n\
             http {{\n access_log off;\n keepalive_requests 1000000;\n\
             client_body_temp_path {d}/body;\n proxy_temp_path {d}/proxy;\n\
             fastcgi_temp_path {d}/fastcgi;\n uwsgi_temp_path {d}/uwsgi;\n scgi_temp_path {d}/scgi;\n\
             server {{\n  listen 127.0.0.1:{port}{listen_opts};\n  root {d}/html;\n\
             location = /busy {{ return 503; }}\n }}\n}}\n"
        ),
    )
    .unwrap();
    let k = spawn_nginx(&dir);
    wait_listening(port, "nginx");
    Some((k, port))
}

/// Two self-signed server certificates made by the openssl CLI in `dir`: `cert.pem` and
/// `cert.key` for `localhost` and 127.0.0.1 (P-256), `other.pem` and `other.key` for an
/// unrelated name (a wrong CA). Valid 2 days; panics when openssl fails.
#[allow(dead_code)]
pub fn self_signed(dir: &Path) {
    for (name, subject, san) in [
        (
            "cert",
            "/CN=localhost",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ),
        ("other", "/CN=other", "subjectAltName=DNS:other"),
    ] {
        let out = Command::new("/usr/bin/openssl")
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
            .args([
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-days",
                "2",
                "-subj",
            ])
            .args([subject, "-addext", san, "-addext"])
            // A server's certificate, not a CA's (webpki refuses a CA as end entity).
            .args(["basicConstraints=critical,CA:FALSE", "-keyout"])
            .arg(dir.join(format!("{name}.key")))
            .arg("-out")
            .arg(dir.join(format!("{name}.pem")))
            .output()
            .expect("run openssl");
        assert!(out.status.success(), "openssl: {out:?}");
    }
}

/// nginx as [`nginx`] does, but speaking TLS (and HTTP/2 too with `http2`: ALPN h2 beside
/// http/1.1) with a self-signed certificate for `localhost` and 127.0.0.1 made here by
/// the openssl CLI. Gives nginx, its port and the certificate's PEM file (the CA a client
/// trusts); also a second, unrelated self-signed certificate, `other.pem`, in the same
/// folder (a wrong CA).
#[allow(dead_code)]
pub fn nginx_tls(tag: &str, http2: bool) -> Option<(Kill, u16, PathBuf)> {
    if !need(tag, "/usr/sbin/nginx") || !need(tag, "/usr/bin/openssl") {
        return None;
    }
    let dir: PathBuf = tmp(&format!("nginx-tls-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("html")).unwrap();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    std::fs::write(dir.join("html/index.html"), "hello world\n").unwrap();
    self_signed(&dir);
    let port = free_port();
    let d = dir.display();
    std::fs::write(
        dir.join("nginx.conf"),
        format!(
            "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
             error_log {d}/logs/error.log;\nevents {{ worker_connections 1024; }}\n\
             http {{\n access_log off;\n keepalive_requests 1000000;\n\
             client_body_temp_path {d}/body;\n proxy_temp_path {d}/proxy;\n\
             fastcgi_temp_path {d}/fastcgi;\n uwsgi_temp_path {d}/uwsgi;\n scgi_temp_path {d}/scgi;\n\
             server {{\n  listen 127.0.0.1:{port} ssl{};\n\
               ssl_certificate {d}/cert.pem;\n  ssl_certificate_key {d}/cert.key;\n\
               root {d}/html;\n  location = /busy {{ return 503; }}\n }}\n}}\n",
            // nginx 1.22 (Debian 12) takes `listen ... http2`; `http2 on;` is 1.25's.
            if http2 { " http2" } else { "" }
        ),
    )
    .unwrap();
    let k = spawn_nginx(&dir);
    wait_listening(port, "nginx");
    Some((k, port, dir.join("cert.pem")))
}

/// Runs `tpslab load http URL ARGS --json TAG.json`: (exit code, stdout, stderr, the
/// record or Null when none was written); a successful run's report must reproduce its
/// output.
pub fn load_http(
    url: &str,
    args: &[&str],
    tag: &str,
) -> (Option<i32>, String, String, serde_json::Value) {
    with_record(&["load", "http", url], args, tag)
}

/// Runs `tpslab COMMAND ARGS --json TAG.json` (COMMAND: its words, e.g. `["ramp",
/// "http", URL]`): (exit code, stdout, stderr, the record or Null when none was
/// written); a successful run's report must reproduce its output.
pub fn with_record(
    command: &[&str],
    args: &[&str],
    tag: &str,
) -> (Option<i32>, String, String, serde_json::Value) {
    let json = crate::common::tmp(&format!("{tag}.json"));
    let _ = std::fs::remove_file(&json);
    let mut c = crate::common::tpslab();
    c.args(command).args(args).arg("--json").arg(&json);
    let out = crate::common::run(c);
    if out.status.success() {
        crate::common::assert_report_reproduces(&json, &out.stdout);
    }
    let rec = if json.exists() {
        crate::common::record(&json)
    } else {
        serde_json::Value::Null
    };
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        rec,
    )
}

/// Debian's nginx started in the foreground on `dir/nginx.conf` (its prefix `dir`),
/// ended by PID when the guard drops; the caller waits for its port.
pub fn spawn_nginx(dir: &Path) -> Kill {
    let child = Command::new("/usr/sbin/nginx")
        .arg("-p")
        .arg(dir)
        .arg("-c")
        .arg(dir.join("nginx.conf"))
        .stdin(std::process::Stdio::null())
        .spawn()
        .expect("spawn nginx");
    Kill(child)
}
