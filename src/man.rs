//! `tpslab man`: one page per command, clap_mangen's NAME, SYNOPSIS, DESCRIPTION, OPTIONS
//! and SUBCOMMANDS from the command tree, then what the tree does not hold: EXIT STATUS
//! (docs/ci.md's codes), ENVIRONMENT, FILES (the history database, the state folder, the
//! exporter's files), EXAMPLES (command lines of the guide's transcripts, each parsed by
//! the current command tree in the tests below) and SEE ALSO.

use clap_mangen::roff::{bold, italic, roman, Inline, Roff};
use std::io::Write;
use std::path::{Path, PathBuf};

mod examples;
use examples::examples;

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

#[cfg(test)]
mod tests;
