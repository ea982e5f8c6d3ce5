//! `tpslab man`: one page per command, clap_mangen's NAME, SYNOPSIS, DESCRIPTION, OPTIONS
//! and SUBCOMMANDS from the command tree, then what the tree does not hold: EXIT STATUS
//! (docs/ci.md's codes), ENVIRONMENT, FILES (the history database, the state folder, the
//! exporter's files), EXAMPLES (command lines of the guide's transcripts, each parsed by
//! the current command tree in the tests below) and SEE ALSO.

use clap_mangen::roff::{bold, italic, roman, Inline, Roff};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Every page of `cmd` (built) and its visible subcommands, named as clap_mangen names
/// them (`tpslab-run-udp.1`), written into `dir`. Returns the paths written. Errors: a
/// page could not be written.
pub fn write_pages(cmd: clap::Command, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut out = vec![];
    walk(&cmd, None, &mut |c, parent| {
        let man = clap_mangen::Man::new(c.clone());
        let path = dir.join(man.get_filename());
        let mut page = vec![];
        render(c, parent, &mut page)?;
        std::fs::write(&path, page)?;
        out.push(path);
        Ok(())
    })?;
    Ok(out)
}

/// Calls `f` with every visible command of the tree under `cmd` (the deepest first) and
/// its parent's page name.
fn walk(
    cmd: &clap::Command,
    parent: Option<&str>,
    f: &mut dyn FnMut(&clap::Command, Option<&str>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let name = page_name(cmd);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        walk(sub, Some(&name), f)?;
    }
    f(cmd, parent)
}

/// The page of `cmd` (a command of the built tree, or the whole tree for tpslab(1)),
/// `parent` the page of the command above it.
pub fn render(cmd: &clap::Command, parent: Option<&str>, w: &mut dyn Write) -> std::io::Result<()> {
    let man = clap_mangen::Man::new(cmd.clone());
    man.render_title(w)?;
    man.render_name_section(w)?;
    man.render_synopsis_section(w)?;
    man.render_description_section(w)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(w)?;
    }
    if cmd.has_subcommands() {
        man.render_subcommands_section(w)?;
    }
    if cmd.get_after_long_help().is_some() || cmd.get_after_help().is_some() {
        man.render_extra_section(w)?;
    }
    let name = page_name(cmd);
    let mut r = Roff::new();
    // No hyphenation: paths and flags break at their own characters or not at all.
    r.control("nh", []);
    exit_status(&mut r);
    environment(&mut r);
    files(&mut r, &name);
    let examples = examples(&name);
    if !examples.is_empty() {
        r.control("SH", ["EXAMPLES"]);
        for (what, argv) in examples {
            r.control("PP", []).text([roman(*what)]);
            r.control("PP", []).control("nf", []).control("RS", ["4"]);
            r.text([roman(shell_line(argv))]);
            r.control("RE", []).control("fi", []);
        }
    }
    see_also(&mut r, &name, parent);
    r.to_writer(w)?;
    if cmd.get_version().or(cmd.get_long_version()).is_some() {
        man.render_version_section(w)?;
    }
    Ok(())
}

/// `tpslab-run-udp` for `tpslab run udp` (the page's name, as clap_mangen makes it).
fn page_name(cmd: &clap::Command) -> String {
    cmd.get_display_name()
        .unwrap_or_else(|| cmd.get_name())
        .to_string()
}

/// A `.TP` item: a bold tag, then its text.
fn item(r: &mut Roff, tag: &str, text: Vec<Inline>) {
    r.control("TP", []).text([bold(tag)]).text(text);
}

fn exit_status(r: &mut Roff) {
    r.control("SH", ["EXIT STATUS"]);
    let codes: [(&str, &str); 5] = [
        ("0", "The command ran to its end (or to its --duration, or was stopped by Ctrl-C where that is how it ends: watch, serve, tcp --watch-pid) and met no --fail-on condition."),
        ("1", "The run met a --fail-on condition: each reason is one line on standard error; the report and record are written as usual."),
        ("2", "Bad usage or environment: one line on standard error names the value and what is allowed (a flag's value, a file that cannot be written, an address in use, a run that could not start or answered nothing)."),
        ("3", "With --strict: the run was not valid evidence (e.g. the load generator fell behind its schedule)."),
        ("130", "Interrupted (SIGINT) before the plan's end; what was measured so far is written."),
    ];
    for (code, text) in codes {
        item(r, code, vec![roman(text)]);
    }
}

fn environment(r: &mut Roff) {
    r.control("SH", ["ENVIRONMENT"]);
    item(
        r,
        "XDG_DATA_HOME",
        vec![roman(
            "The history database is $XDG_DATA_HOME/tpslab/history.sqlite when set (not empty).",
        )],
    );
    item(r, "HOME", vec![roman("Else the history database is $HOME/.local/share/tpslab/history.sqlite (with neither set, a run is not recorded, which is said on standard error).")]);
    item(
        r,
        "TPSLAB_STATE_DIR",
        vec![roman(
            "The state folder (see FILES) instead of the default.",
        )],
    );
    item(r, "XDG_RUNTIME_DIR", vec![roman("Not as root: the state folder is $XDG_RUNTIME_DIR/tpslab (else the temporary folder's tpslab).")]);
    item(r, "TPSLAB_HOST_LOCK", vec![roman("The path of a file another program locks (flock, exclusive) while it changes host settings: tpslab waits for that lock, at most 600 s, before it changes any (test suites and orchestrators).")]);
}

fn files(r: &mut Roff, page: &str) {
    r.control("SH", ["FILES"]);
    item(
        r,
        "~/.local/share/tpslab/history.sqlite",
        vec![
            roman("The history: every command that writes a record appends it here (SQLite; "),
            bold("tpslab history"),
            roman(" lists it, "),
            bold("tpslab compare"),
            roman(" reads it). Off for one run with "),
            bold("--no-history"),
            roman("; delete the file to forget every run. Root's is under /root."),
        ],
    );
    item(r, "/var/lib/tpslab/", vec![roman("The state folder as root (mode 0700): host-settings-journal.json, the host settings a run changed (sysctls), restored by the next tpslab when the run was killed; lock, held while a run changes them.")]);
    if page == "tpslab" || page == "tpslab-watch" {
        item(r, "/usr/lib/systemd/system/tpslab-exporter@.service", vec![roman("The exporter unit: tpslab watch --port PORT for the instance tpslab-exporter@PORT, metrics on 127.0.0.1:19464.")]);
        item(r, "/etc/default/tpslab-exporter", vec![roman("Its settings for every instance (commented); /etc/default/tpslab-exporter@PORT for one, e.g. TPSLAB_METRICS_LISTEN=127.0.0.1:19465 for a second instance.")]);
        item(
            r,
            "/var/lib/tpslab-exporter/watch-PORT.json",
            vec![roman("Each instance's last record.")],
        );
    }
    item(r, "/usr/share/doc/tpslab/", vec![roman("The guide: README.md, docs/ (the scenarios S1 to S5, monitoring, CI gating, the reference).")]);
}

fn see_also(r: &mut Roff, page: &str, parent: Option<&str>) {
    r.control("SH", ["SEE ALSO"]);
    let mut pages: Vec<String> = vec![];
    if page != "tpslab" {
        pages.push("tpslab".into());
        // The parent command's page (tpslab-run for tpslab-run-udp).
        if let Some(p) = parent.filter(|p| *p != "tpslab") {
            pages.push(p.into());
        }
    } else {
        for p in [
            "diagnose-udp",
            "run-udp",
            "watch",
            "ramp-tcp",
            "capacity-udp",
            "report",
            "history",
            "doctor",
        ] {
            pages.push(format!("tpslab-{p}"));
        }
    }
    let mut text: Vec<Inline> = vec![];
    for (i, p) in pages.iter().enumerate() {
        if i > 0 {
            text.push(roman(", "));
        }
        text.push(bold(p.as_str()));
        text.push(roman("(1)"));
    }
    text.push(roman(", "));
    text.push(italic("/usr/share/doc/tpslab/README.md"));
    r.text(text);
}

/// A command line as a shell reads it back: words with characters the shell treats
/// specially single-quoted.
fn shell_line(argv: &[&str]) -> String {
    argv.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:,=+@%".contains(c));
            if plain {
                a.to_string()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The examples of a page: what it does, then its command line. From the guide's
/// transcripts (docs/transcripts/*.sh, run for the docs), output files renamed.
fn examples(page: &str) -> &'static [(&'static str, &'static [&'static str])] {
    match page {
        "tpslab" => &[
            ("S1's built-in case: tpslab's own server with a small buffer under bursts; where the datagrams were lost and why (docs/s1-udp-loss.md).", &["tpslab", "diagnose"]),
            ("A CI gate: exit 1 when more than 1 % of the requests go unanswered (docs/ci.md).", &["tpslab", "run", "udp", "--rate", "20000", "--burst", "200", "--burst-interval", "10ms", "--rcvbuf", "20000", "--duration", "1s", "--fail-on", "loss>1%"]),
            ("The runs of the history, UDP runs only.", &["tpslab", "history", "--kind", "udp_run"]),
        ],
        "tpslab-run-udp" => &[
            ("S1's bursts against tpslab's own server, the record kept.", &["tpslab", "run", "udp", "--rate", "100000", "--burst", "5000", "--burst-interval", "50ms", "--duration", "3s", "--json", "s1.json"]),
            ("Exit 1 above 1 % loss, exit 3 when the run is not valid evidence.", &["tpslab", "run", "udp", "--rate", "10000", "--duration", "1s", "--strict", "--fail-on", "loss>1%,invalid"]),
            ("Served to Prometheus while it runs, and written for node_exporter's textfile collector at the end (docs/monitoring.md).", &["tpslab", "run", "udp", "--rate", "20000", "--burst", "200", "--burst-interval", "10ms", "--rcvbuf", "20000", "--duration", "3s", "--size", "64", "--metrics-listen", "127.0.0.1:19464", "--metrics-file", "run.prom"]),
        ],
        "tpslab-diagnose" => &[
            ("S1's built-in case.", &["tpslab", "diagnose", "--no-verify"]),
        ],
        "tpslab-diagnose-udp" => &[
            ("A server already running on 127.0.0.1:9710.", &["tpslab", "diagnose", "udp", "127.0.0.1:9710", "--rate", "10000", "--duration", "2s", "--json", "d.json"]),
            ("A server tpslab starts ({port} is the port it picks), the fix verified by a second run (docs/own-server.md).", &["tpslab", "diagnose", "udp", "--server-cmd", "java UdpServer.java {port}", "--burst", "1000", "--burst-interval", "50ms", "--duration", "3s", "--warmup", "1s", "--verify"]),
        ],
        "tpslab-watch" => &[
            ("A long-running exporter of one process's sockets for Prometheus (docs/monitoring.md).", &["tpslab", "watch", "--pid", "4242", "--duration", "365d", "--metrics-listen", "127.0.0.1:19464"]),
            ("One minute of a server's sockets, the record kept.", &["tpslab", "watch", "--pid", "4242", "--duration", "60s", "--json", "server.json"]),
        ],
        "tpslab-serve-udp" => &[
            ("tpslab's reference server: 4 threads, a 16 KiB buffer, 20 us of work per datagram.", &["tpslab", "serve", "udp", "--bind", "127.0.0.1:9101", "--threads", "4", "--rcvbuf", "16KiB", "--work", "20us"]),
        ],
        "tpslab-capacity-udp" => &[
            ("The highest rate a server on 127.0.0.1:9100 sustains (docs/own-server.md).", &["tpslab", "capacity", "udp", "127.0.0.1:9100", "--burst", "200", "--load-cpus", "0", "--start-rate", "10k", "--step-duration", "1s", "--warmup", "300ms", "--budget", "60s", "--json", "cap.json"]),
        ],
        "tpslab-capacity-http" => &[
            ("The request rate an HTTP server sustains.", &["tpslab", "capacity", "http", "http://127.0.0.1:18080/", "--start-rate", "250", "--step-duration", "1s", "--warmup", "300ms", "--budget", "60s"]),
        ],
        "tpslab-ramp-tcp" => &[
            ("S3: users 1 to 110 against tpslab's serialised server; where TPS stops growing and why.", &["tpslab", "ramp", "tcp", "--serialize", "--server-serial", "10ms", "--users", "1..110", "--step", "+10", "--step-duration", "3s", "--warmup", "1s", "--svg", "s3.svg", "--json", "s3.json"]),
        ],
        "tpslab-tcp" => &[
            ("S4: a 30 ms, 622 Mbit/s path in the lab with 64 KiB buffers.", &["tpslab", "tcp", "--lab-rtt", "30ms", "--lab-rate", "622mbit", "--sndbuf", "64KiB", "--sink-rcvbuf", "64KiB", "--target-rate", "80mbit", "--duration", "5s"]),
        ],
        "tpslab-sweep" => &[
            ("Two receive buffers, three repeats each.", &["tpslab", "sweep", "--factor", "rcvbuf=16000000,8192", "--repeat", "3", "--burst", "1000", "--burst-interval", "20ms", "--duration", "600ms", "--warmup", "200ms", "--out", "sw", "--json", "sw.json"]),
        ],
        "tpslab-doctor" => &[
            ("This host's settings.", &["tpslab", "doctor"]),
            ("Settings for a workload, with the sysctl lines to apply written to a file.", &["tpslab", "doctor", "--for", "udp", "--rate", "100000", "--burst", "5000", "--size", "1024", "--write-snippet", "60-udp.conf"]),
        ],
        "tpslab-probe-idle" => &[
            ("S5: how long a path (here haproxy) keeps an idle connection.", &["tpslab", "probe", "idle", "127.0.0.1:18431", "--min", "29s", "--max", "36s", "--resolution", "1s"]),
        ],
        "tpslab-compare" => &[
            ("Two records side by side, as a page too.", &["tpslab", "compare", "small.json", "big.json", "--html", "compare.html"]),
        ],
        "tpslab-history" => &[
            ("The UDP runs of the history.", &["tpslab", "history", "--kind", "udp_run"]),
        ],
        "tpslab-report" => &[
            ("A record's terminal report again, as its command printed it.", &["tpslab", "report", "s1.json"]),
        ],
        "tpslab-fleet-ssh" => &[
            ("Three agents started over ssh at the same moment (docs/fleet.md).", &["tpslab", "fleet", "ssh", "agent0,agent1,agent2", "--plan", "plan.toml", "--start-in", "3s", "--out", "records", "--run"]),
        ],
        "tpslab-merge" => &[
            ("The agents' records as one, with the server's watch.", &["tpslab", "merge", "records/agent-0.json", "records/agent-1.json", "--server", "server.json", "--json", "merged.json"]),
        ],
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> clap::Command {
        let mut c = tpslab_cli::command("0").disable_help_subcommand(true);
        c.build();
        c
    }

    #[test]
    fn every_example_parses_and_names_its_page() {
        let mut names = vec![];
        walk(&tree(), None, &mut |c, _| {
            names.push(page_name(c));
            Ok(())
        })
        .unwrap();
        let mut shown = 0;
        for name in &names {
            for (_, argv) in examples(name) {
                let args: Vec<std::ffi::OsString> = argv.iter().map(Into::into).collect();
                assert!(
                    tpslab_cli::parse(&args, "0").is_ok(),
                    "{name}: {} does not parse",
                    shell_line(argv)
                );
                // The page's command is the example's.
                let words = name.trim_start_matches("tpslab").replace('-', " ");
                assert!(
                    argv.join(" ").starts_with(&format!("tpslab{words}")),
                    "{name}: {argv:?}"
                );
                shown += 1;
            }
        }
        // No example under a page name that no longer exists.
        let listed = [
            "tpslab",
            "tpslab-run-udp",
            "tpslab-diagnose",
            "tpslab-diagnose-udp",
            "tpslab-watch",
            "tpslab-serve-udp",
            "tpslab-capacity-udp",
            "tpslab-capacity-http",
            "tpslab-ramp-tcp",
            "tpslab-tcp",
            "tpslab-sweep",
            "tpslab-doctor",
            "tpslab-probe-idle",
            "tpslab-compare",
            "tpslab-history",
            "tpslab-report",
            "tpslab-fleet-ssh",
            "tpslab-merge",
        ];
        for l in listed {
            assert!(names.iter().any(|n| n == l), "{l} is no page: {names:?}");
            assert!(!examples(l).is_empty(), "{l}");
        }
        assert!(shown >= listed.len());
    }

    #[test]
    fn a_page_has_the_sections_the_tree_lacks() {
        let mut page = vec![];
        let t = tree();
        let watch = t.find_subcommand("watch").unwrap();
        render(watch, Some("tpslab"), &mut page).unwrap();
        let page = String::from_utf8(page).unwrap();
        let at = |s: &str| {
            page.find(s)
                .unwrap_or_else(|| panic!("{s} missing:\n{page}"))
        };
        // In man-pages(7)'s order, after clap_mangen's own.
        let order = [
            at(".SH NAME"),
            at(".SH SYNOPSIS"),
            at(".SH OPTIONS"),
            at(".SH \"EXIT STATUS\""),
            at(".SH ENVIRONMENT"),
            at(".SH FILES"),
            at(".SH EXAMPLES"),
            at(".SH \"SEE ALSO\""),
        ];
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
        for s in [
            "\\fB130\\fR",
            "history.sqlite",
            "/etc/default/tpslab\\-exporter",
            "127.0.0.1:19464",
            "\\fBtpslab\\fR(1)",
        ] {
            at(s);
        }
        assert_eq!(
            shell_line(&["tpslab", "x", "loss>1%", "a b", "it's"]),
            r"tpslab x 'loss>1%' 'a b' 'it'\''s'"
        );
    }
}
