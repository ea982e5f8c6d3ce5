//! The man pages: every example parses, a page has the sections the tree lacks.
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
