//! `/proc/kallsyms`: the kernel's symbol table, to name the function behind a code address
//! (the `location` a tracepoint such as `skb:kfree_skb` records).
//!
//! Lines are `ADDRESS TYPE NAME [MODULE]` (`ffffffff82047670 t udp_queue_rcv_one_skb`).
//! Only text symbols (type `t`/`T`) are kept. Without `CAP_SYSLOG` (or with
//! `kernel.kptr_restrict` set) every address reads 0: the table is then empty and nothing
//! is named, never named wrongly.

/// The kernel's text symbols, sorted by address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Kallsyms {
    /// (start address, name with ` [module]` when a module's), ascending.
    syms: Vec<(u64, String)>,
}

impl Kallsyms {
    /// Parses the text of `/proc/kallsyms`. Lines that do not parse and addresses of 0
    /// (hidden from this reader) are skipped.
    pub fn parse(text: &str) -> Kallsyms {
        let mut syms: Vec<(u64, String)> = text
            .lines()
            .filter_map(|l| text_symbol(l).map(|(a, n, m)| (a, full_name(n, m))))
            .collect();
        syms.sort_by_key(|s| s.0);
        Kallsyms { syms }
    }

    /// Reads `/proc/kallsyms` (or text like it) line by line and keeps only the symbol
    /// that names each of `addrs` (the nearest text symbol at or below it): for those
    /// addresses [`Kallsyms::name`] answers as with the whole table, in memory of a few
    /// symbols instead of the table's 120,000 or more (which doubled a run's peak RSS).
    /// Errors: the reader's.
    pub fn for_addresses(r: impl std::io::BufRead, addrs: &[u64]) -> std::io::Result<Kallsyms> {
        // Per address: the best symbol so far (start, name); of symbols at one address
        // the last listed, as in [`Kallsyms::parse`].
        let mut best: Vec<Option<(u64, String)>> = vec![None; addrs.len()];
        let mut line = String::new();
        let mut r = r;
        loop {
            line.clear();
            if r.read_line(&mut line)? == 0 {
                break;
            }
            let Some((start, name, module)) = text_symbol(&line) else {
                continue;
            };
            for (x, b) in addrs.iter().zip(best.iter_mut()) {
                if start <= *x && b.as_ref().is_none_or(|(s, _)| start >= *s) {
                    *b = Some((start, full_name(name, module)));
                }
            }
        }
        let mut syms: Vec<(u64, String)> = best.into_iter().flatten().collect();
        syms.sort_by_key(|s| s.0);
        syms.dedup_by_key(|s| s.0);
        Ok(Kallsyms { syms })
    }

    /// Text symbols known.
    pub fn len(&self) -> usize {
        self.syms.len()
    }

    /// True when no symbol is known (e.g. addresses hidden from this reader).
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// `function+0xoffset` for a code address: the nearest symbol at or below it. `None`
    /// below the first symbol, or more than 1 MiB past the nearest (an address no symbol
    /// covers: better unnamed than misnamed).
    pub fn name(&self, addr: u64) -> Option<String> {
        let i = self.syms.partition_point(|s| s.0 <= addr).checked_sub(1)?;
        let (start, name) = &self.syms[i];
        let off = addr - start;
        if off > 1 << 20 {
            return None;
        }
        Some(match name.split_once(' ') {
            Some((f, m)) => format!("{f}+{off:#x} {m}"),
            None => format!("{name}+{off:#x}"),
        })
    }
}

/// (address, name, module) of a text symbol's line (type `t`/`T`, address not 0).
fn text_symbol(l: &str) -> Option<(u64, &str, Option<&str>)> {
    let mut f = l.split_whitespace();
    let addr = u64::from_str_radix(f.next()?, 16).ok()?;
    let kind = f.next()?;
    let name = f.next()?;
    if addr == 0 || !matches!(kind, "t" | "T") {
        return None;
    }
    Some((addr, name, f.next()))
}

fn full_name(name: &str, module: Option<&str>) -> String {
    match module {
        Some(m) => format!("{name} {m}"),
        None => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "ffffffff81000000 T _stext
ffffffff82047670 t udp_queue_rcv_one_skb
ffffffff81e3f970 t kfree_skbmem
ffffffff820479a0 D some_data
ffffffffc0a01000 t nft_do_chain\t[nf_tables]
0000000000000000 T hidden
garbage line
";

    #[test]
    fn names_the_nearest_text_symbol_below() {
        let k = Kallsyms::parse(TEXT);
        assert_eq!(k.len(), 4, "data, hidden and garbage lines are skipped");
        assert_eq!(
            k.name(0xffffffff82047670 + 0x1a3).as_deref(),
            Some("udp_queue_rcv_one_skb+0x1a3")
        );
        // Unsorted input: kfree_skbmem comes after udp_queue_rcv_one_skb in the text.
        assert_eq!(
            k.name(0xffffffff81e3f970).as_deref(),
            Some("kfree_skbmem+0x0")
        );
        assert_eq!(
            k.name(0xffffffffc0a01000 + 0x40).as_deref(),
            Some("nft_do_chain+0x40 [nf_tables]")
        );
    }

    #[test]
    fn does_not_guess_outside_the_table() {
        let k = Kallsyms::parse(TEXT);
        assert_eq!(k.name(0x1000), None, "below the first symbol");
        assert_eq!(
            k.name(0xffffffffc0a01000 + (2 << 20)),
            None,
            "far past the last"
        );
        assert!(Kallsyms::parse("0000000000000000 T _stext\n").is_empty());
    }

    #[test]
    fn kept_symbols_name_their_addresses_as_the_whole_table() {
        let whole = Kallsyms::parse(TEXT);
        let addrs = [
            0xffffffff82047670 + 0x1a3,
            0xffffffff81e3f970,
            0xffffffffc0a01000 + 0x40,
            0xffffffff81000010,
            0x1000,
            0xffffffffc0a01000 + (2 << 20),
        ];
        let kept = Kallsyms::for_addresses(TEXT.as_bytes(), &addrs).unwrap();
        assert!(kept.len() <= 4);
        for a in addrs {
            assert_eq!(kept.name(a), whole.name(a), "{a:#x}");
        }
        // Two names at one address (the kernel has such aliases): the same one chosen.
        let alias = "ffffffff81000000 T srso_alias_untrain_ret\nffffffff81000000 T _stext\n";
        let kept = Kallsyms::for_addresses(alias.as_bytes(), &[0xffffffff81000008]).unwrap();
        assert_eq!(
            kept.name(0xffffffff81000008),
            Kallsyms::parse(alias).name(0xffffffff81000008)
        );
        // The kernel's own table, where this reader may see its addresses.
        let Ok(text) = std::fs::read_to_string("/proc/kallsyms") else {
            return;
        };
        let whole = Kallsyms::parse(&text);
        if whole.len() < 1000 {
            eprintln!("kernel addresses hidden from this reader: the fixture alone is checked");
            return;
        }
        // The kernel's own symbols (a module's or a BPF program's may come and go
        // between the two reads).
        let addrs: Vec<u64> = whole
            .syms
            .iter()
            .filter(|s| !s.1.contains(' '))
            .step_by(997)
            .map(|s| s.0 + 0x11)
            .collect();
        let f = std::fs::File::open("/proc/kallsyms").unwrap();
        let kept = Kallsyms::for_addresses(std::io::BufReader::new(f), &addrs).unwrap();
        assert!(kept.len() <= addrs.len());
        for a in &addrs {
            assert_eq!(kept.name(*a), whole.name(*a), "{a:#x}");
        }
    }
}
