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
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                let addr = u64::from_str_radix(f.next()?, 16).ok()?;
                let kind = f.next()?;
                let name = f.next()?;
                if addr == 0 || !matches!(kind, "t" | "T") {
                    return None;
                }
                Some(match f.next() {
                    Some(m) => (addr, format!("{name} {m}")),
                    None => (addr, name.to_string()),
                })
            })
            .collect();
        syms.sort_by_key(|s| s.0);
        Kallsyms { syms }
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
}
