//! The HPACK decoder against RFC 7541 Appendix C (C.3-C.6: requests and responses,
//! without and with Huffman coding, a 256-byte table with evictions), against
//! httlib-hpack's encoder on random header lists, and on bad blocks. Every
//! check of a keeping decoder is also made of a `:status`-only one: the same status and
//! the same table size after each block.

use super::*;
use proptest::prelude::*;

fn hex(h: &str) -> Vec<u8> {
    let h: String = h.split_whitespace().collect();
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
        .collect()
}

fn list(fields: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
    fields
        .iter()
        .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

/// Decodes `blocks` in order with a keeping decoder of table size `max` and a
/// `:status`-only one: each block's fields and the table's size after it, checked, and
/// the status-only decoder's status and size agree.
/// A header block in hex, its fields, and the table's size after it.
type Block<'a> = (&'a str, &'a [(&'a str, &'a str)], usize);

fn check(max: usize, blocks: &[Block]) {
    let mut keep = HeaderDecoder::keeping_max(max);
    let mut fast = HeaderDecoder {
        limit: max,
        max,
        ..Default::default()
    };
    for (i, (h, want, size)) in blocks.iter().enumerate() {
        let b = hex(h);
        let got = keep.fields(&b).unwrap();
        assert_eq!(got, list(want), "block {i}");
        assert_eq!(keep.table_size(), *size, "block {i}: table size");
        let status = want
            .iter()
            .find(|(n, _)| *n == ":status")
            .map(|(_, v)| v.parse::<u16>().unwrap());
        assert_eq!(fast.status(&b).unwrap(), status, "block {i}: status");
        assert_eq!(fast.table_size(), *size, "block {i}: fast table size");
    }
}

const REQ1: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
];
const REQ2: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
    ("cache-control", "no-cache"),
];
const REQ3: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "https"),
    (":path", "/index.html"),
    (":authority", "www.example.com"),
    ("custom-key", "custom-value"),
];
const RESP1: &[(&str, &str)] = &[
    (":status", "302"),
    ("cache-control", "private"),
    ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
    ("location", "https://www.example.com"),
];
const RESP2: &[(&str, &str)] = &[
    (":status", "307"),
    ("cache-control", "private"),
    ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
    ("location", "https://www.example.com"),
];
const RESP3: &[(&str, &str)] = &[
    (":status", "200"),
    ("cache-control", "private"),
    ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
    ("location", "https://www.example.com"),
    ("content-encoding", "gzip"),
    (
        "set-cookie",
        "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
    ),
];

#[test]
fn rfc_7541_c3_requests_without_huffman() {
    check(
        4096,
        &[
            ("828684410f7777772e6578616d706c652e636f6d", REQ1, 57),
            ("828684be58086e6f2d6361636865", REQ2, 110),
            (
                "828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565",
                REQ3,
                164,
            ),
        ],
    );
}

#[test]
fn rfc_7541_c4_requests_with_huffman() {
    check(
        4096,
        &[
            ("828684418cf1e3c2e5f23a6ba0ab90f4ff", REQ1, 57),
            ("828684be5886a8eb10649cbf", REQ2, 110),
            (
                "828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf",
                REQ3,
                164,
            ),
        ],
    );
}

#[test]
fn rfc_7541_c5_responses_without_huffman_evict() {
    check(
        256,
        &[
            (
                "4803333032580770726976617465611d4d6f6e2c203231204f637420323031332032303a31333a
                 323120474d546e1768747470733a2f2f7777772e6578616d706c652e636f6d",
                RESP1,
                222,
            ),
            ("4803333037c1c0bf", RESP2, 222),
            (
                "88c1611d4d6f6e2c203231204f637420323031332032303a31333a323220474d54c05a04677a69
                 707738666f6f3d4153444a4b48514b425a584f5157454f50495541585157454f49553b206d61
                 782d6167653d333630303b2076657273696f6e3d31",
                RESP3,
                215,
            ),
        ],
    );
}

#[test]
fn rfc_7541_c6_responses_with_huffman_evict() {
    check(
        256,
        &[
            (
                "488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29
                 ad171863c78f0b97c8e9ae82ae43d3",
                RESP1,
                222,
            ),
            ("4883640effc1c0bf", RESP2, 222),
            (
                "88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7821dd7
                 f2e6c7b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d50
                 07",
                RESP3,
                215,
            ),
        ],
    );
}

#[test]
fn the_static_table_is_httlib_hpacks() {
    for i in 1..=61u8 {
        let mut theirs = vec![];
        httlib_hpack::Decoder::default()
            .decode(&mut vec![0x80 | i], &mut theirs)
            .unwrap();
        let (n, v, _) = &theirs[0];
        let ours = HeaderDecoder::keeping().fields(&[0x80 | i]).unwrap();
        assert_eq!(ours, vec![(n.clone(), v.clone())], "entry {i}");
    }
}

#[test]
fn counted_lengths_are_remembered_by_their_bytes() {
    // nginx's reply: server, date, content-type and last-modified enter the table as
    // Huffman strings, counted (then remembered); etag and accept-ranges are skipped.
    let block = hex(
        "8876 89aa 6355 e580 ae21 2e1f 6196 dc34 fd28 2794 d27e ea08 0271 4039 7020
         b800 298b 46ff 5f87 497c a589 d34d 1f5c 0134 6c96 dc34 fd28 2794 d27e ea08 0271
         4039 700f dc6d f531 68df 0083 2a47 378a fe5c 8c03 740c bab3 5fcf 0089 1908 5ad2
         b583 aa62 a384 8fd2 4a8f",
    );
    let mut keep = HeaderDecoder::keeping();
    let mut fast = HeaderDecoder::default();
    for _ in 0..20 {
        let f = keep.fields(&block).unwrap();
        assert_eq!(f[0], (b":status".to_vec(), b"200".to_vec()));
        assert_eq!(f[1], (b"server".to_vec(), b"nginx/1.22.1".to_vec()));
        assert_eq!(f.len(), 8);
        assert_eq!(fast.status(&block).unwrap(), Some(200));
        assert_eq!(fast.table_size(), keep.table_size());
    }
    // More distinct strings than the memory holds, each counted right.
    let mut enc = httlib_hpack::Encoder::default();
    let (mut keep, mut fast) = (HeaderDecoder::keeping(), HeaderDecoder::default());
    for i in 0..40 {
        let mut b = vec![];
        let v = format!("value-{}", i % 11).into_bytes();
        enc.encode((b"x-k".to_vec(), v, 0x1 | 0x2 | 0x4), &mut b)
            .unwrap();
        keep.fields(&b).unwrap();
        fast.status(&b).unwrap();
        assert_eq!(fast.table_size(), keep.table_size(), "field {i}");
    }
}

#[test]
fn bad_blocks_are_one_line_errors() {
    for (b, why) in [
        (&b"\x80"[..], "index 0"),
        (b"\xc0", "past the tables"),
        (b"\xbf", "past the tables"),
        (b"\xff\xff\xff\xff\xff\xff", "over 2^32"),
        (b"\xff", "past the block"),
        (b"\x40\x05ab", "past the block"),
        (b"\x48\x81\xff", "Huffman"),
        (b"\x3f\xe2\x1f", "over 4096"),
        (b"\x88\x20", "after a field"),
    ] {
        let e = HeaderDecoder::default().status(b).unwrap_err();
        assert!(e.starts_with("http2: ") && e.contains(why), "{b:?}: {e}");
        assert!(!e.contains('\n'));
    }
    // A size update first is fine; then the table holds nothing.
    let mut d = HeaderDecoder::default();
    assert_eq!(d.status(b"\x20\x48\x03200").unwrap(), Some(200));
    assert_eq!(d.table_size(), 0);
    // `:status` not of 3 digits, and no `:status`: None; the first `:status` counts.
    let mut d = HeaderDecoder::default();
    assert_eq!(d.status(b"\x08\x0220").unwrap(), None);
    assert_eq!(d.status(b"\x82").unwrap(), None);
    assert_eq!(d.status(b"\x8d\x88").unwrap(), Some(404));
    // A status-only decoder cannot list fields.
    assert!(HeaderDecoder::default().fields(b"\x88").is_err());
}

/// A header list for the property: names and values from small alphabets (so that the
/// encoder finds indexed names and fields), with `:status` among the names.
fn header_list() -> impl Strategy<Value = Vec<(Vec<u8>, Vec<u8>, u8)>> {
    let name = prop_oneof![
        Just(b":status".to_vec()),
        Just(b"date".to_vec()),
        Just(b"server".to_vec()),
        Just(b"x-a".to_vec()),
        proptest::collection::vec(b'a'..=b'z', 1..12),
    ];
    let value = prop_oneof![
        Just(b"200".to_vec()),
        Just(b"404".to_vec()),
        Just(b"503".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..40),
    ];
    proptest::collection::vec((name, value, 0u8..32), 0..12)
}

proptest! {
    /// Blocks httlib-hpack encodes (any mix of Huffman, indexing, never indexed, best
    /// representation; with a table of 256 or 4096 bytes, so that entries are evicted)
    /// decode to the fields encoded (later blocks refer to the table's entries, so a
    /// table kept wrong shows); the `:status`-only decoder gives the first `:status`
    /// and keeps its table at the same size.
    #[test]
    fn encoded_blocks_decode(
        blocks in proptest::collection::vec(header_list(), 1..6),
        small in any::<bool>(),
    ) {
        let max = if small { 256 } else { 4096 };
        let mut enc = httlib_hpack::Encoder::with_dynamic_size(max as u32);
        let mut keep = HeaderDecoder::keeping_max(max);
        let mut fast = HeaderDecoder { limit: max, max, ..Default::default() };
        for fields in blocks {
            let mut b = vec![];
            for (n, v, flags) in &fields {
                // Never indexed and with indexing together is not a representation.
                let flags = if flags & 0xc == 0xc { flags & !0x8 } else { *flags };
                enc.encode((n.clone(), v.clone(), flags), &mut b).unwrap();
            }
            let got = keep.fields(&b).unwrap();
            let want: Vec<_> = fields.iter().map(|(n, v, _)| (n.clone(), v.clone())).collect();
            prop_assert_eq!(&got, &want);
            let status = fields
                .iter()
                .find(|(n, _, _)| n == b":status")
                .and_then(|(_, v, _)| {
                    (v.len() == 3 && v.iter().all(u8::is_ascii_digit))
                        .then(|| std::str::from_utf8(v).unwrap().parse::<u16>().unwrap())
                });
            prop_assert_eq!(fast.status(&b).unwrap(), status);
            prop_assert_eq!(keep.table_size(), fast.table_size());
        }
    }

    /// Any bytes: an error or a status, never a panic; a block the keeping decoder reads,
    /// the `:status`-only one reads too (it reads less of it).
    #[test]
    fn any_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..48)) {
        let k = HeaderDecoder::keeping().fields(&b).map(|_| ());
        let f = HeaderDecoder::default().status(&b).map(|_| ());
        if k.is_ok() {
            prop_assert!(f.is_ok());
        }
    }
}

/// An integer with more continuation bytes than 2^32 needs (RFC 7541 5.1; zero bits
/// padded on) is refused in one line, never shifted past 64 bits (a panic with overflow
/// checks on); one cut short is refused too.
#[test]
fn an_integer_with_too_many_continuation_bytes_is_refused() {
    // An indexed field (7-bit prefix all ones), then 12 continuation bytes of zero bits.
    let mut b = vec![0xff];
    b.extend([0x80; 12]);
    b.push(0x00);
    let e = HeaderDecoder::default().status(&b).unwrap_err();
    assert!(e.contains("an integer over 2^32"), "{e}");
    // Cut short: the block ends inside the integer.
    let e = HeaderDecoder::default().status(&[0xff, 0x80]).unwrap_err();
    assert!(e.contains("past the block"), "{e}");
}
