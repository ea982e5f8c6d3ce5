//! HPACK decoding (RFC 7541) of the reply header blocks `load http --http2` reads: the
//! `:status` of each, and the dynamic table kept exactly so the next block decodes.
//!
//! Only what `:status` and the table need is decoded: a value is Huffman-decoded only
//! when its name is `:status`; a value that enters the dynamic table is only counted
//! (its decoded length is its share of the table's size, RFC 7541 4.1); a field that
//! does not enter the table is skipped over. Each table entry keeps its name's and
//! value's lengths, whether its name is `:status` and that status, not its text.
//! [`HeaderDecoder::keeping`] keeps every text and returns every field (the tests check
//! it against RFC 7541 Appendix C; a `:status`-only decoder must agree with it).
//!
//! Errors (a connection error, one line starting `http2: `): an index past the tables,
//! an integer over 2^32, a string past the block, a bad Huffman string among those it
//! decodes or counts (a field that neither is `:status` nor enters the table is not
//! read, so its Huffman strings are not checked), a table size update over
//! SETTINGS_HEADER_TABLE_SIZE or after a field.

use std::collections::VecDeque;

use super::huffman;

/// RFC 7541 Appendix A: the static table, entries 1..=61.
const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// Static entries whose name is `:status` (8..=14).
const STATUS_FIRST: usize = 8;
const STATUS_LAST: usize = 14;

/// Bytes of `:status` Huffman-coded: a name of another length is not `:status`.
const STATUS_HUFFMAN: usize = huffman::encoded_len(b":status");

/// The size of the dynamic table this client allows (its SETTINGS_HEADER_TABLE_SIZE is
/// the default), bytes.
pub const TABLE_SIZE: usize = 4096;

/// A dynamic table entry.
struct Entry {
    /// Octets of the name.
    name_len: u32,
    /// Its size as the table counts it: name + value + 32 octets.
    size: u32,
    /// The name is `:status`.
    is_status: bool,
    /// The value as a status (a `:status` entry with 3 digits; else 0).
    status: u16,
    /// Name then value (a keeping decoder only).
    text: Vec<u8>,
}

/// What a field's name is, for its value's sake.
struct Name {
    len: usize,
    is_status: bool,
}

/// A connection's HPACK decoder: its dynamic table, and a buffer for the strings it
/// decodes (reused from one header block to the next).
pub struct HeaderDecoder {
    table: VecDeque<Entry>,
    /// The table's size (RFC 7541 4.1), bytes.
    size: usize,
    /// Its maximum, as the last size update set it (at most `max`).
    limit: usize,
    /// The largest size an update may set: SETTINGS_HEADER_TABLE_SIZE.
    max: usize,
    /// Keep every text (names, values) and return every field.
    keep: bool,
    name: Vec<u8>,
    value: Vec<u8>,
    fields: super::h2::HeaderList,
    /// The last Huffman strings counted, with their decoded lengths (round robin).
    memo: [(Vec<u8>, usize); MEMO],
    memo_next: usize,
}

/// Huffman strings whose decoded length is remembered: a server that sends the same
/// values into the table reply after reply (nginx: server, date, content-type,
/// last-modified) costs a comparison, not a count.
const MEMO: usize = 8;

impl Default for HeaderDecoder {
    fn default() -> Self {
        HeaderDecoder {
            table: VecDeque::with_capacity(64),
            size: 0,
            limit: TABLE_SIZE,
            max: TABLE_SIZE,
            keep: false,
            name: Vec::with_capacity(64),
            value: Vec::with_capacity(64),
            fields: vec![],
            memo: std::array::from_fn(|_| (Vec::with_capacity(32), 0)),
            memo_next: 0,
        }
    }
}

fn bad(why: impl std::fmt::Display) -> String {
    format!("http2: a header block HPACK cannot decode ({why})")
}

/// The integer at `b[*at]` with an `n`-bit prefix (RFC 7541 5.1); `*at` moves past it.
fn integer(b: &[u8], at: &mut usize, n: u32) -> Result<usize, String> {
    let mask = (1u32 << n) - 1;
    let Some(&first) = b.get(*at) else {
        return Err(bad("an integer past the block"));
    };
    let first = first as u32 & mask;
    *at += 1;
    if first < mask {
        return Ok(first as usize);
    }
    let (mut v, mut shift) = (mask as u64, 0u32);
    loop {
        let Some(&c) = b.get(*at) else {
            return Err(bad("an integer past the block"));
        };
        *at += 1;
        v += ((c & 0x7f) as u64) << shift;
        if v > u32::MAX as u64 {
            return Err(bad("an integer over 2^32"));
        }
        if c & 0x80 == 0 {
            return Ok(v as usize);
        }
        shift += 7;
        // Five continuation bytes carry 35 bits: more (zero bits padded on) is no
        // integer under 2^32, and would shift past the u64.
        if shift > 28 {
            return Err(bad("an integer over 2^32"));
        }
    }
}

/// The string literal at `b[*at]` (RFC 7541 5.2): its raw bytes and whether they are
/// Huffman-coded; `*at` moves past it.
fn string<'a>(b: &'a [u8], at: &mut usize) -> Result<(&'a [u8], bool), String> {
    let Some(&first) = b.get(*at) else {
        return Err(bad("a string past the block"));
    };
    let len = integer(b, at, 7)?;
    let Some(s) = b.get(*at..*at + len) else {
        return Err(bad("a string past the block"));
    };
    *at += len;
    Ok((s, first & 0x80 != 0))
}

/// Appends string `s` (Huffman-coded or not) to `out`.
fn text(s: &[u8], huff: bool, out: &mut Vec<u8>) -> Result<(), String> {
    if huff {
        huffman::decode(s, out).map_err(|_| bad("a bad Huffman string"))
    } else {
        out.extend_from_slice(s);
        Ok(())
    }
}

/// A `:status` value as a number: 3 digits, else 0.
fn status_of(v: &[u8]) -> u16 {
    if v.len() == 3 && v.iter().all(u8::is_ascii_digit) {
        v.iter().fold(0, |n, d| n * 10 + (d - b'0') as u16)
    } else {
        0
    }
}

impl HeaderDecoder {
    /// A decoder that keeps every name and value, for [`HeaderDecoder::fields`].
    pub fn keeping() -> Self {
        HeaderDecoder {
            keep: true,
            ..Default::default()
        }
    }

    /// A keeping decoder whose table holds `max` bytes (RFC 7541 Appendix C.5 and C.6
    /// assume 256).
    #[cfg(test)]
    fn keeping_max(max: usize) -> Self {
        HeaderDecoder {
            keep: true,
            limit: max,
            max,
            ..Default::default()
        }
    }

    /// The dynamic table's size (RFC 7541 4.1: each entry's name and value octets + 32),
    /// bytes.
    pub fn table_size(&self) -> usize {
        self.size
    }

    /// The `:status` of a whole header block (None: none, or not 3 digits; the first
    /// `:status` field counts); every block of the connection is decoded, in order, to
    /// keep HPACK's table. Errors: a block HPACK cannot decode (a connection error).
    pub fn status(&mut self, block: &[u8]) -> Result<Option<u16>, String> {
        self.fields.clear();
        self.block(block)
    }

    /// Every field of a whole header block, as (name, value), for a decoder made
    /// [`HeaderDecoder::keeping`] (else an error). Errors as [`HeaderDecoder::status`].
    pub fn fields(&mut self, block: &[u8]) -> Result<super::h2::HeaderList, String> {
        if !self.keep {
            return Err(bad("this decoder keeps no names or values"));
        }
        self.fields.clear();
        self.block(block)?;
        Ok(std::mem::take(&mut self.fields))
    }

    fn block(&mut self, b: &[u8]) -> Result<Option<u16>, String> {
        let mut at = 0;
        let mut status: Option<Option<u16>> = None;
        let mut fields = 0usize;
        while at < b.len() {
            let c = b[at];
            if c & 0x80 != 0 {
                // Indexed field (6.1).
                let i = integer(b, &mut at, 7)?;
                let (is_status, st) = self.indexed(i)?;
                if is_status && status.is_none() {
                    status = Some((st != 0).then_some(st));
                }
            } else if c & 0xe0 == 0x20 {
                // Dynamic table size update (6.3): only before the block's first field.
                let n = integer(b, &mut at, 5)?;
                if fields > 0 {
                    return Err(bad("a table size update after a field"));
                }
                if n > self.max {
                    let m = self.max;
                    return Err(bad(format_args!("a table size of {n} over {m}")));
                }
                self.limit = n;
                self.evict(0);
                continue;
            } else {
                // A literal (6.2): with incremental indexing (01), else without or never
                // indexed (0000, 0001).
                let index = c & 0xc0 == 0x40;
                let i = integer(b, &mut at, if index { 6 } else { 4 })?;
                self.name.clear();
                let name = if i == 0 {
                    let (s, huff) = string(b, &mut at)?;
                    // A name neither in the table nor as long as `:status` is skipped.
                    if index || self.keep || s.len() == if huff { STATUS_HUFFMAN } else { 7 } {
                        text(s, huff, &mut self.name)?;
                    }
                    Name {
                        len: self.name.len(),
                        is_status: self.name == b":status",
                    }
                } else {
                    self.name_of(i)?
                };
                let (s, huff) = string(b, &mut at)?;
                self.value.clear();
                let value_len = if name.is_status || self.keep {
                    text(s, huff, &mut self.value)?;
                    self.value.len()
                } else if index && huff {
                    self.counted(s)?
                } else {
                    s.len()
                };
                let st = if name.is_status {
                    status_of(&self.value)
                } else {
                    0
                };
                if name.is_status && status.is_none() {
                    status = Some((st != 0).then_some(st));
                }
                if self.keep {
                    self.fields.push((self.name.clone(), self.value.clone()));
                }
                if index {
                    self.add(name, value_len, st);
                }
            }
            fields += 1;
        }
        Ok(status.flatten())
    }

    /// The decoded length of Huffman string `s` (remembered, [`MEMO`]).
    fn counted(&mut self, s: &[u8]) -> Result<usize, String> {
        if let Some((_, n)) = self.memo.iter().find(|(raw, _)| raw.as_slice() == s) {
            return Ok(*n);
        }
        let n = huffman::decoded_len(s).map_err(|_| bad("a bad Huffman string"))?;
        let slot = &mut self.memo[self.memo_next];
        slot.0.clear();
        slot.0.extend_from_slice(s);
        slot.1 = n;
        self.memo_next = (self.memo_next + 1) % MEMO;
        Ok(n)
    }

    /// Field `i` of the static or the dynamic table: whether its name is `:status`, and
    /// its status.
    fn indexed(&mut self, i: usize) -> Result<(bool, u16), String> {
        if (1..=STATIC.len()).contains(&i) {
            let (n, v) = STATIC[i - 1];
            if self.keep {
                self.fields.push((n.into(), v.into()));
            }
            let s = (STATUS_FIRST..=STATUS_LAST).contains(&i);
            return Ok((s, if s { status_of(v.as_bytes()) } else { 0 }));
        }
        let e = self.dynamic(i)?;
        let r = (e.is_status, e.status);
        if self.keep {
            let (n, v) = e.text.split_at(e.name_len as usize);
            let f = (n.to_vec(), v.to_vec());
            self.fields.push(f);
        }
        Ok(r)
    }

    /// Field `i`'s name (kept in `self.name` by a keeping decoder).
    fn name_of(&mut self, i: usize) -> Result<Name, String> {
        if (1..=STATIC.len()).contains(&i) {
            let n = STATIC[i - 1].0;
            if self.keep {
                self.name.extend_from_slice(n.as_bytes());
            }
            return Ok(Name {
                len: n.len(),
                is_status: (STATUS_FIRST..=STATUS_LAST).contains(&i),
            });
        }
        let e = self.dynamic(i)?;
        let name = Name {
            len: e.name_len as usize,
            is_status: e.is_status,
        };
        if self.keep {
            let n = e.name_len as usize;
            let t = &self.table[i - STATIC.len() - 1].text[..n];
            self.name.extend_from_slice(t);
        }
        Ok(name)
    }

    fn dynamic(&self, i: usize) -> Result<&Entry, String> {
        if i == 0 {
            return Err(bad("index 0"));
        }
        self.table
            .get(i - STATIC.len() - 1)
            .ok_or_else(|| bad(format_args!("index {i} past the tables")))
    }

    /// Adds a field to the dynamic table (RFC 7541 4.4): older entries are evicted to
    /// make room; one larger than the table empties it and is not added.
    fn add(&mut self, name: Name, value_len: usize, status: u16) {
        let size = name.len + value_len + 32;
        self.evict(size);
        if size > self.limit {
            return;
        }
        let text = if self.keep {
            let mut t = Vec::with_capacity(self.name.len() + self.value.len());
            t.extend_from_slice(&self.name);
            t.extend_from_slice(&self.value);
            t
        } else {
            vec![]
        };
        self.table.push_front(Entry {
            name_len: name.len as u32,
            size: size as u32,
            is_status: name.is_status,
            status,
            text,
        });
        self.size += size;
    }

    /// Evicts the oldest entries until `room` more bytes fit under the limit (or the
    /// table is empty).
    fn evict(&mut self, room: usize) {
        while self.size + room > self.limit {
            let Some(e) = self.table.pop_back() else {
                break;
            };
            self.size -= e.size as usize;
        }
    }
}

#[cfg(test)]
#[path = "hpack_tests.rs"]
mod tests;
