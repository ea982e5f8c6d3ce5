//! What tpslab says of a bad command line: clap's usage errors rewritten (tpslab's one
//! line for a bad value, a tip for a flag given above the subcommand that takes it), and
//! errors about a value the user never typed marked as a default.

/// What tpslab prints for a usage error clap found (escaped: clap echoes the bad value,
/// never raw ESC or NUL bytes on the terminal). A value refused by its parser is tpslab's
/// one line, `tpslab: error: --FLAG VALUE: allowed ...`; a flag unknown where it was given
/// but a flag of a subcommand below gets a tip naming where it belongs
/// ([`belongs_to`]); the rest is clap's own message.
pub fn usage_error(cmd: &clap::Command, mut e: clap::Error, args: &[std::ffi::OsString]) -> String {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    match e.kind() {
        ErrorKind::ValueValidation => {
            let text = e.to_string();
            let line = text.lines().next().unwrap_or_default();
            let line = line.strip_prefix("error: ").unwrap_or(line);
            return format!("tpslab: error: {}\n", crate::error_line(line));
        }
        ErrorKind::UnknownArgument => {
            let flag = match e.get(ContextKind::InvalidArg) {
                Some(ContextValue::String(s)) => s.clone(),
                _ => String::new(),
            };
            if let Some(tip) = belongs_to(cmd, args, &flag) {
                let mut tips = match e.get(ContextKind::Suggested) {
                    Some(ContextValue::StyledStrs(v)) => v.clone(),
                    _ => vec![],
                };
                tips.insert(0, tip.into());
                e.insert(ContextKind::Suggested, ContextValue::StyledStrs(tips));
            }
        }
        _ => {}
    }
    crate::cut_words(&crate::printable(&e.to_string()))
}

/// The tip for `flag` (`--pid`, `--pid=5`) given where it is unknown: the commands below
/// the one the command line reached (`tpslab diagnose`) that take it (`tpslab diagnose
/// udp`), with where to write it. None when no command below takes it.
fn belongs_to(cmd: &clap::Command, args: &[std::ffi::OsString], flag: &str) -> Option<String> {
    let long = flag.strip_prefix("--")?.split('=').next()?;
    // The command the words reached before the flag: subcommand names, skipping the values
    // of flags.
    let mut at = cmd;
    let mut path = vec![cmd.get_name().to_string()];
    let mut words = args.iter().skip(1).map(|a| a.to_string_lossy());
    while let Some(w) = words.next() {
        if w == "--" || w.split('=').next() == Some(&format!("--{long}")) {
            break;
        }
        if let Some(name) = w.strip_prefix("--") {
            let takes = at
                .get_arguments()
                .find(|a| a.get_long() == Some(name))
                .is_some_and(|a| a.get_action().takes_values());
            if takes && !name.contains('=') {
                words.next();
            }
            continue;
        }
        if let Some(sub) = at
            .get_subcommands()
            .find(|c| c.get_name() == w || c.get_all_aliases().any(|a| a == w))
        {
            path.push(sub.get_name().to_string());
            at = sub;
        }
    }
    fn below(c: &clap::Command, long: &str, path: &mut Vec<String>, found: &mut Vec<String>) {
        for sub in c.get_subcommands() {
            path.push(sub.get_name().to_string());
            if sub.get_arguments().any(|a| a.get_long() == Some(long)) {
                found.push(path.join(" "));
            }
            below(sub, long, path, found);
            path.pop();
        }
    }
    let mut found = vec![];
    below(at, long, &mut path, &mut found);
    let here = path.join(" ");
    match found.as_slice() {
        [] => None,
        [one] => Some(format!(
            "--{long} is a flag of '{one}', not of '{here}': write it after '{}' ({one} ... --{long} ...)",
            one.rsplit(' ').next().unwrap_or_default()
        )),
        [many @ .., last] => Some(format!(
            "--{long} is a flag of {} and '{last}', not of '{here}': write it after the subcommand",
            many.iter()
                .map(|c| format!("'{c}'"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Notes every flag of the command line's commands left at its clap default, as errors
/// write it (a duration as humantime formats it: `--resolution 5s`).
pub fn note_defaults(cmd: &clap::Command, m: &clap::ArgMatches) {
    use clap::parser::ValueSource;
    for a in cmd.get_arguments() {
        let (Some(long), [d]) = (a.get_long(), a.get_default_values()) else {
            continue;
        };
        if m.value_source(a.get_id().as_str()) != Some(ValueSource::DefaultValue) {
            continue;
        }
        let d = d.to_string_lossy();
        let is_duration = a
            .get_value_names()
            .is_some_and(|v| v.iter().any(|n| n.as_str() == crate::flags::DURATION));
        let shown = match tpslab_plan::units::parse_duration("", &d) {
            Ok(v) if is_duration => humantime::format_duration(v).to_string(),
            _ => d.to_string(),
        };
        crate::flags::note_default(format!("--{long} {shown}"), "its default, not given".into());
    }
    if let Some((name, sub_m)) = m.subcommand() {
        if let Some(sub) = cmd.find_subcommand(name) {
            note_defaults(sub, sub_m);
        }
    }
}

/// `msg` with every value it names that the user did not give marked so (`--resolution
/// 5s (its default, not given) is not below the range ...`): an error about a value never
/// typed says where it came from.
pub fn name_defaults(msg: &str) -> String {
    let noted = crate::flags::noted_defaults();
    let mut out = msg.to_string();
    for (shown, why) in noted {
        let Some(at) = find_whole(&out, &shown) else {
            continue;
        };
        out.insert_str(at + shown.len(), &format!(" ({why})"));
    }
    out
}

/// The first place `needle` stands in `hay` as whole words: not inside a longer flag
/// (`--burst-interval` for `--interval`) or value (`10ms` for `10m`).
fn find_whole(hay: &str, needle: &str) -> Option<usize> {
    let word = |c: char| c.is_alphanumeric() || c == '-' || c == '_';
    hay.match_indices(needle).map(|(i, _)| i).find(|&i| {
        let before = hay[..i].chars().next_back();
        let rest = &hay[i + needle.len()..];
        // A full stop ends a sentence; followed by a digit it is a decimal point.
        let decimal = rest.starts_with('.') && rest[1..].starts_with(|c: char| c.is_ascii_digit());
        !before.is_some_and(word) && !rest.starts_with(word) && !decimal
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn a_value_never_typed_is_named_as_a_default_in_errors() {
        assert_eq!(
            find_whole("--interval 10ms over", "--interval 10ms"),
            Some(0)
        );
        // Not inside a longer flag or value, a full stop ends a sentence.
        assert_eq!(find_whole("--burst-interval 10ms", "--interval 10ms"), None);
        assert_eq!(find_whole("--interval 10msx", "--interval 10ms"), None);
        assert_eq!(find_whole("--max 1h.5", "--max 1h"), None);
        assert_eq!(find_whole("x --max 1h.", "--max 1h"), Some(2));
        // The defaults of the commands a command line reached, as errors write them.
        let mut cmd = crate::Cli::command();
        let m = cmd
            .try_get_matches_from_mut(["tpslab", "probe", "idle", "--min", "2h"])
            .unwrap();
        note_defaults(&cmd, &m);
        let e = name_defaults("--max 1h is not above --min 2h");
        assert_eq!(e, "--max 1h (its default, not given) is not above --min 2h");
        // A value given is not marked.
        let e = name_defaults("--min 2h is not below --connections 16.");
        assert_eq!(
            e,
            "--min 2h is not below --connections 16 (its default, not given)."
        );
    }
}
