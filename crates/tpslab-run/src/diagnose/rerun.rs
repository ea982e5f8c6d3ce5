//! The command line that verifies what a diagnosis could not: the same diagnosis with
//! `--server-cmd`, rebuilt from this invocation's arguments and, when the server's PID is
//! known, from its own command line (`/proc/PID/cmdline`, its working directory), every word
//! quoted by shlex.

use tpslab_record::{NotVerified, RunRecord};

/// Why a verification asked for against a server tpslab did not start was not run, and
/// the same diagnosis with `--server-cmd` that would run it: the server's command line
/// from /proc/PID/cmdline and its working directory (when its PID is known and one of its
/// arguments names the port), else a COMMAND placeholder to fill in. `target` is TARGET as
/// the user wrote it, `argv` this invocation's arguments (program name first).
pub fn cannot_restart(
    skipped: &[String],
    before: &RunRecord,
    target: &str,
    argv: &[std::ffi::OsString],
) -> NotVerified {
    let why = format!(
        "tpslab did not start this server and cannot restart it, and {} reaches only sockets created after the change: nothing was applied, nothing was verified",
        if skipped.is_empty() {
            "the recommended change".to_string()
        } else {
            skipped.join(" and ")
        }
    );
    let port = before
        .generator
        .as_ref()
        .and_then(|g| g.target.rsplit(':').next()?.parse::<u16>().ok())
        .unwrap_or(0);
    let pid = before.target.as_ref().map(|t| t.pid);
    let found = pid.and_then(|pid| {
        let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let argv: Vec<String> = raw
            .split(|&b| b == 0)
            .filter(|w| !w.is_empty())
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect();
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok();
        server_cmd_template(&argv, cwd.as_ref().and_then(|c| c.to_str()), port)
    });
    let (cmd, run_note) = match (&found, pid) {
        (Some(t), Some(pid)) => (
            t.clone(),
            Some(format!("the command is PID {pid}'s, from /proc/{pid}/cmdline and its working directory, with {{port}} where it named port {port}; tpslab starts it on a free port of its own for each run")),
        ),
        (None, Some(pid)) => (
            "COMMAND {port}".to_string(),
            Some(format!("COMMAND: the command that starts your server, with {{port}} where it takes its port (PID {pid}'s command line does not name port {port})")),
        ),
        (None, None) | (Some(_), None) => (
            "COMMAND {port}".to_string(),
            Some("COMMAND: the command that starts your server, with {port} where it takes its port".to_string()),
        ),
    };
    match rerun_argv(argv.iter().cloned()) {
        Ok(argv) => NotVerified {
            why,
            run: Some(sh_line(&with_server_cmd(&argv, target, &cmd))),
            run_note,
        },
        Err(e) => NotVerified {
            why,
            run: None,
            run_note: Some(e),
        },
    }
}

/// This invocation's arguments (`args`: the process's, program name first), `tpslab`
/// first; Err naming the argument that is not UTF-8 text (a path given as raw bytes),
/// which a command line printed as text could not repeat.
pub fn rerun_argv(args: impl Iterator<Item = std::ffi::OsString>) -> Result<Vec<String>, String> {
    std::iter::once(Ok("tpslab".to_string()))
        .chain(args.skip(1).map(|a| {
            a.into_string().map_err(|a| {
                format!(
                    "the command to run is not shown: its argument {:?} is not UTF-8 text; run this diagnosis again as asked, with the change made",
                    a.to_string_lossy()
                )
            })
        }))
        .collect()
}

/// Words as one sh line, quoted by shlex (a word with a NUL byte cannot be: named).
pub fn sh_line(words: &[String]) -> String {
    shlex::try_join(words.iter().map(String::as_str))
        .unwrap_or_else(|e| format!("(not quotable for sh: {e})"))
}

/// `argv` of `diagnose udp TARGET [--pid P] [--port P] ...` turned into the same
/// diagnosis with `--server-cmd CMD`: TARGET (the first argument after `udp` equal to
/// it), `--pid` and `--port` with their values removed, `--server-cmd CMD` after `udp`.
fn with_server_cmd(argv: &[String], target: &str, cmd: &str) -> Vec<String> {
    let mut out = vec![];
    let mut skip_value = false;
    let mut after_udp = false;
    let mut target_seen = false;
    for w in argv {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        if w == "--pid" || w == "--port" {
            skip_value = true;
            continue;
        }
        if w.starts_with("--pid=") || w.starts_with("--port=") {
            continue;
        }
        if after_udp && !target_seen && w == target {
            target_seen = true;
            continue;
        }
        out.push(w.clone());
        if w == "udp" && !after_udp {
            after_udp = true;
            out.push("--server-cmd".into());
            out.push(cmd.into());
        }
    }
    out
}

/// A `--server-cmd` template from a server's command line: `cd CWD && ARGV...` quoted by
/// shlex, each argument that names `port` (the whole argument, or after its last `:` or
/// `=`) with `{port}` in its place; None when no argument names it.
fn server_cmd_template(argv: &[String], cwd: Option<&str>, port: u16) -> Option<String> {
    // A word shlex leaves unquoted, replaced by {port} after quoting ({ and } would be).
    const MARK: &str = "TPSLABPORTMARK";
    if port == 0 || argv.is_empty() || argv.iter().any(|w| w.contains(MARK)) {
        return None;
    }
    let p = port.to_string();
    let mut named = false;
    let words: Vec<String> = argv
        .iter()
        .map(|w| {
            let cut = w.rfind([':', '=']).map_or(0, |i| i + 1);
            if w[cut..] == p {
                named = true;
                format!("{}{MARK}", &w[..cut])
            } else {
                w.clone()
            }
        })
        .collect();
    if !named {
        return None;
    }
    let mut line = sh_line(&words);
    if let Some(d) = cwd.filter(|d| *d != "/") {
        line = format!("cd {} && {line}", sh_line(&[d.to_string()]));
    }
    Some(line.replace(MARK, "{port}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &[&str]) -> Vec<String> {
        s.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn the_servers_command_line_becomes_a_server_cmd_template() {
        let argv = words(&["python3", "/tmp/s33/echo.py", "127.0.0.1", "9533"]);
        let t = server_cmd_template(&argv, Some("/srv/my app"), 9533).unwrap();
        assert_eq!(
            t,
            "cd '/srv/my app' && python3 /tmp/s33/echo.py 127.0.0.1 {port}"
        );
        // sh reads it back as the same words, {port} where the port was.
        let back = shlex::split(&t).unwrap();
        assert_eq!(
            back[3..],
            words(&["python3", "/tmp/s33/echo.py", "127.0.0.1", "{port}"])
        );
        let argv = words(&["named", "-f", "--listen=[::1]:53", "-c", "a b.conf"]);
        assert_eq!(
            server_cmd_template(&argv, None, 53).unwrap(),
            "named -f '--listen=[::1]:{port}' -c 'a b.conf'"
        );
        // A command line that does not name the port: no template.
        assert_eq!(
            server_cmd_template(&words(&["named", "-f"]), None, 53),
            None
        );
        assert_eq!(
            server_cmd_template(&words(&["srv", "95330"]), None, 9533),
            None
        );
    }

    #[test]
    fn an_argument_that_is_not_utf8_is_named_not_a_panic() {
        use std::os::unix::ffi::OsStringExt;
        // `--json $'/tmp/\xff.json'`: std::env::args() panicked here, after the whole
        // diagnosis had run, losing it.
        let args = vec![
            std::ffi::OsString::from("/usr/bin/tpslab"),
            "diagnose".into(),
            "--json".into(),
            std::ffi::OsString::from_vec(b"/tmp/\xff.json".to_vec()),
        ];
        let e = rerun_argv(args.into_iter()).unwrap_err();
        assert!(
            e.contains("is not UTF-8 text") && e.contains("/tmp/"),
            "{e}"
        );
        let ok = rerun_argv(
            ["/usr/bin/tpslab", "diagnose", "--verify"]
                .map(std::ffi::OsString::from)
                .into_iter(),
        )
        .unwrap();
        assert_eq!(ok, words(&["tpslab", "diagnose", "--verify"]));
    }

    #[test]
    fn a_diagnosis_of_an_address_becomes_one_with_server_cmd() {
        let argv = words(&[
            "tpslab",
            "diagnose",
            "udp",
            "127.0.0.1:9533",
            "--pid",
            "12843",
            "--duration",
            "2s",
            "--port=9533",
            "--verify",
        ]);
        let cmd = "cd /srv && python3 echo.py 127.0.0.1 {port}";
        let out = with_server_cmd(&argv, "127.0.0.1:9533", cmd);
        assert_eq!(
            out,
            words(&[
                "tpslab",
                "diagnose",
                "udp",
                "--server-cmd",
                cmd,
                "--duration",
                "2s",
                "--verify"
            ])
        );
        let line = sh_line(&out);
        assert_eq!(
            line,
            "tpslab diagnose udp --server-cmd 'cd /srv && python3 echo.py 127.0.0.1 {port}' --duration 2s --verify"
        );
        assert_eq!(shlex::split(&line).unwrap(), out);
    }
}
