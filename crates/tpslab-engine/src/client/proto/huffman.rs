//! HPACK's Huffman code (RFC 7541 5.2 and Appendix B), decoding side: a string's octets,
//! or only how many there are (what the dynamic table's size accounting needs), four bits
//! at a time through a state table built at compile time (as nghttp2 decodes).
//!
//! The code is canonical: each symbol's code follows from the code lengths alone
//! ([`LENGTHS`], symbol 256 is EOS), shortest first, equal lengths in symbol order.
//! Errors (RFC 7541 5.2): the EOS symbol inside a string, or padding that is longer than
//! 7 bits or not the most significant bits of EOS (all ones).

/// Code length in bits of each symbol 0..=256 (256: EOS), RFC 7541 Appendix B.
const LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5,
    5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6,
    6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22,
    23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22,
    21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20,
    22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19,
    21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22,
    22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
];

/// Each symbol's code (right-aligned in its length), canonical order.
pub(crate) const CODES: [u32; 257] = canonical();

const fn canonical() -> [u32; 257] {
    let mut codes = [0u32; 257];
    let mut code = 0u32;
    let mut len = 1u8;
    while len <= 30 {
        let mut s = 0;
        while s < 257 {
            if LENGTHS[s] == len {
                codes[s] = code;
                code += 1;
            }
            s += 1;
        }
        code <<= 1;
        len += 1;
    }
    codes
}

/// Bytes of `s` Huffman-coded (padded to a whole byte).
pub const fn encoded_len(s: &[u8]) -> usize {
    let (mut bits, mut i) = (0usize, 0);
    while i < s.len() {
        bits += LENGTHS[s[i] as usize] as usize;
        i += 1;
    }
    bits.div_ceil(8)
}

/// A transition: the nibble emitted a symbol.
const EMIT: u8 = 1;
/// A transition: the bits read so far end a valid string (a whole symbol, or padding of
/// at most 7 ones).
const ACCEPT: u8 = 2;
/// A transition: EOS was decoded (an error).
const FAIL: u8 = 4;

/// One step of the decoder: from a state (an inner node of the code's tree, 0 the root)
/// on four bits.
#[derive(Clone, Copy)]
struct Step {
    next: u8,
    flags: u8,
    sym: u8,
}

/// The code's tree: 256 inner nodes (257 leaves), each with its two children (an inner
/// node's index, or `LEAF | symbol`), its depth, and whether its path is all ones.
struct Tree {
    child: [[u16; 2]; 256],
    depth: [u8; 256],
    ones: [bool; 256],
}

const LEAF: u16 = 0x8000;

const fn tree() -> Tree {
    let mut t = Tree {
        child: [[0; 2]; 256],
        depth: [0; 256],
        ones: [false; 256],
    };
    t.ones[0] = true;
    let mut nodes = 1usize;
    let mut s = 0;
    while s < 257 {
        let (code, len) = (CODES[s], LENGTHS[s] as u32);
        let mut n = 0usize;
        let mut i = len;
        while i > 0 {
            i -= 1;
            let bit = ((code >> i) & 1) as usize;
            if i == 0 {
                t.child[n][bit] = LEAF | s as u16;
            } else {
                if t.child[n][bit] == 0 {
                    t.child[n][bit] = nodes as u16;
                    t.depth[nodes] = t.depth[n] + 1;
                    t.ones[nodes] = t.ones[n] && bit == 1;
                    nodes += 1;
                }
                n = t.child[n][bit] as usize;
            }
        }
        s += 1;
    }
    t
}

/// The decoder's table: state x nibble.
static TABLE: [[Step; 16]; 256] = table();

const fn table() -> [[Step; 16]; 256] {
    let t = tree();
    let mut out = [[Step {
        next: 0,
        flags: 0,
        sym: 0,
    }; 16]; 256];
    let mut st = 0;
    while st < 256 {
        let mut nib = 0;
        while nib < 16 {
            let (mut n, mut flags, mut sym) = (st, 0u8, 0u8);
            let mut i = 4;
            while i > 0 {
                i -= 1;
                let c = t.child[n][(nib >> i) & 1];
                if c & LEAF != 0 {
                    if c & !LEAF == 256 {
                        flags |= FAIL;
                    } else {
                        // At most one symbol in four bits: the shortest code has five.
                        flags |= EMIT;
                        sym = (c & 0xff) as u8;
                    }
                    n = 0;
                } else {
                    n = c as usize;
                }
            }
            if n == 0 || (t.ones[n] && t.depth[n] <= 7) {
                flags |= ACCEPT;
            }
            out[st][nib] = Step {
                next: n as u8,
                flags,
                sym,
            };
            nib += 1;
        }
        st += 1;
    }
    out
}

/// The bytes are not a valid Huffman string (RFC 7541 5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadHuffman;

/// Walks `src`, giving each decoded octet to `emit`.
#[inline(always)]
fn walk(src: &[u8], mut emit: impl FnMut(u8)) -> Result<(), BadHuffman> {
    let mut st = 0usize;
    let mut flags = ACCEPT;
    for &b in src {
        for nib in [b >> 4, b & 0xf] {
            let s = TABLE[st][nib as usize];
            if s.flags & FAIL != 0 {
                return Err(BadHuffman);
            }
            if s.flags & EMIT != 0 {
                emit(s.sym);
            }
            st = s.next as usize;
            flags = s.flags;
        }
    }
    if flags & ACCEPT == 0 {
        return Err(BadHuffman);
    }
    Ok(())
}

/// Decodes the Huffman string `src`, appending its octets to `dst`.
pub fn decode(src: &[u8], dst: &mut Vec<u8>) -> Result<(), BadHuffman> {
    dst.reserve(src.len() * 8 / 5);
    walk(src, |b| dst.push(b))
}

/// How many octets the Huffman string `src` decodes to (checked as [`decode`] checks it).
pub fn decoded_len(src: &[u8]) -> Result<usize, BadHuffman> {
    let mut n = 0;
    walk(src, |_| n += 1)?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Appends `s`'s Huffman code (the canonical codes), padded with ones.
    fn encode(s: &[u8]) -> Vec<u8> {
        let (mut acc, mut bits, mut out) = (0u64, 0u32, vec![]);
        for &b in s {
            acc = (acc << LENGTHS[b as usize]) | CODES[b as usize] as u64;
            bits += LENGTHS[b as usize] as u32;
            while bits >= 8 {
                bits -= 8;
                out.push((acc >> bits) as u8);
            }
        }
        if bits > 0 {
            out.push(((acc << (8 - bits)) | (0xff >> bits)) as u8);
        }
        out
    }

    #[test]
    fn the_codes_are_rfc_7541_appendix_b() {
        // A few rows of Appendix B, as printed there (code, length).
        for (sym, code, len) in [
            (b'0' as usize, 0x0, 5),
            (b' ' as usize, 0x14, 6),
            (b'a' as usize, 0x3, 5),
            (b'A' as usize, 0x21, 6),
            (b'z' as usize, 0x7b, 7),
            (0usize, 0x1ff8, 13),
            (10, 0x3ffffffc, 30),
            (255, 0x3ffffee, 26),
            (256, 0x3fffffff, 30),
        ] {
            assert_eq!((CODES[sym], LENGTHS[sym]), (code, len), "symbol {sym}");
        }
        // The same code as httlib-huffman's encoder, symbol by symbol.
        for b in 0..=255u8 {
            let mut theirs = vec![];
            httlib_huffman::encode(&[b], &mut theirs).unwrap();
            assert_eq!(encode(&[b]), theirs, "symbol {b}");
        }
    }

    #[test]
    fn rfc_7541_c4_strings_decode() {
        // C.4.1-C.4.3: www.example.com, no-cache, custom-key, custom-value.
        for (hex, text) in [
            ("f1e3c2e5f23a6ba0ab90f4ff", &b"www.example.com"[..]),
            ("a8eb10649cbf", b"no-cache"),
            ("25a849e95ba97d7f", b"custom-key"),
            ("25a849e95bb8e8b4bf", b"custom-value"),
            // C.6.1: the date and location of the first response.
            (
                "d07abe941054d444a8200595040b8166e082a62d1bff",
                b"Mon, 21 Oct 2013 20:13:21 GMT",
            ),
            (
                "9d29ad171863c78f0b97c8e9ae82ae43d3",
                b"https://www.example.com",
            ),
        ] {
            let src = hex_bytes(hex);
            let mut out = vec![];
            decode(&src, &mut out).unwrap();
            assert_eq!(out, text);
            assert_eq!(decoded_len(&src), Ok(text.len()));
            assert_eq!(encode(text), src);
        }
    }

    #[test]
    fn bad_padding_and_eos_are_errors() {
        // EOS inside the string (30 ones, then padding).
        assert_eq!(decoded_len(&[0xff, 0xff, 0xff, 0xff]), Err(BadHuffman));
        // Padding of 8 ones after 'a' (00011, then 3+8 ones).
        assert_eq!(decoded_len(&[0x1f, 0xff]), Err(BadHuffman));
        // Padding that is not all ones: 'a' then 000.
        assert_eq!(decoded_len(&[0x18]), Err(BadHuffman));
        // A whole byte of padding alone.
        assert_eq!(decoded_len(&[0xff]), Err(BadHuffman));
        assert_eq!(decoded_len(&[]), Ok(0));
        // 'a' padded with 3 ones.
        assert_eq!(decoded_len(&[0x1f]), Ok(1));
    }

    fn hex_bytes(h: &str) -> Vec<u8> {
        (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
            .collect()
    }

    proptest! {
        /// Any octets: encoded and decoded back, and counted.
        #[test]
        fn any_string_round_trips(s in proptest::collection::vec(any::<u8>(), 0..64)) {
            let e = encode(&s);
            let mut out = vec![];
            prop_assert_eq!(decode(&e, &mut out), Ok(()));
            prop_assert_eq!(&out, &s);
            prop_assert_eq!(decoded_len(&e), Ok(s.len()));
        }

        /// Any bytes: no panic, and the count agrees with the decode.
        #[test]
        fn any_bytes_decode_or_fail_alike(b in proptest::collection::vec(any::<u8>(), 0..32)) {
            let mut out = vec![];
            let d = decode(&b, &mut out).map(|_| out.len());
            prop_assert_eq!(d, decoded_len(&b));
        }
    }
}
