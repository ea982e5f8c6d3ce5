//! The encoding of the latency histograms a record keeps ([`crate::run::LatencyHistograms`]):
//! HdrHistogram's portable V2 encoding, deflate-compressed, as base64; decoded within
//! bounds, so a record read back cannot make the decoder allocate beyond them.

/// `h` in HdrHistogram's portable encoding (V2, deflate-compressed), as base64 (standard
/// alphabet): lossless, and what HdrHistogram's own tools read (a histogram log's
/// payload).
pub fn encode_histogram(h: &hdrhistogram::Histogram<u64>) -> String {
    use base64::Engine;
    use hdrhistogram::serialization::Serializer;
    let mut bytes = Vec::new();
    hdrhistogram::serialization::V2DeflateSerializer::new()
        .serialize(h, &mut bytes)
        .expect("a histogram serialises into memory");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The histogram of [`encode_histogram`]'s text (V2 compressed or not), decoded within
/// bounds: at most [`limits::HISTOGRAM_ENCODED_BYTES`] of text, inflated to at most
/// [`limits::HISTOGRAM_DECODED_BYTES`], its header within tpslab's range (lowest 1 ns,
/// highest at most [`limits::HISTOGRAM_MAX_NS`], at most
/// [`limits::HISTOGRAM_MAX_DIGITS`] significant digits) and its payload within what was
/// inflated, all checked before the decoder allocates; its total count (the sum of its
/// counts) at most [`tpslab_plan::limits::MAX_FIGURE`]. Errors (a phrase): not base64,
/// too long, out of range, a total over 2^53, or not a histogram in that encoding (what
/// the decoder says).
///
/// [`limits::HISTOGRAM_ENCODED_BYTES`]: tpslab_plan::limits::HISTOGRAM_ENCODED_BYTES
/// [`limits::HISTOGRAM_DECODED_BYTES`]: tpslab_plan::limits::HISTOGRAM_DECODED_BYTES
/// [`limits::HISTOGRAM_MAX_NS`]: tpslab_plan::limits::HISTOGRAM_MAX_NS
/// [`limits::HISTOGRAM_MAX_DIGITS`]: tpslab_plan::limits::HISTOGRAM_MAX_DIGITS
pub fn decode_histogram(s: &str) -> Result<hdrhistogram::Histogram<u64>, String> {
    use base64::Engine;
    use std::io::Read;
    use tpslab_plan::limits::{
        HISTOGRAM_DECODED_BYTES, HISTOGRAM_ENCODED_BYTES, HISTOGRAM_MAX_DIGITS, HISTOGRAM_MAX_NS,
        MAX_FIGURE,
    };
    const V2: u32 = 0x1c84_9313;
    const V2_DEFLATE: u32 = 0x1c84_9314;
    let s = s.trim();
    if s.len() > HISTOGRAM_ENCODED_BYTES {
        return Err(format!(
            "{} bytes of text; allowed up to {HISTOGRAM_ENCODED_BYTES}",
            s.len()
        ));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(s)
        .map_err(|e| format!("not base64: {e}"))?;
    let be32 = |b: &[u8], at: usize| {
        b.get(at..at + 4)
            .map(|x| u32::from_be_bytes(x.try_into().expect("4 bytes")))
    };
    let be64 = |b: &[u8], at: usize| {
        b.get(at..at + 8)
            .map(|x| u64::from_be_bytes(x.try_into().expect("8 bytes")))
    };
    // The plain V2 encoding, inflated here (never more than the bound) when compressed.
    let plain = match be32(&bytes, 0) {
        Some(V2) => bytes,
        Some(V2_DEFLATE) => {
            let len = be32(&bytes, 4).ok_or("a compressed histogram without its length")?;
            let rest = bytes.get(8..).unwrap_or_default();
            let mut out = Vec::new();
            flate2::read::ZlibDecoder::new(rest.take(len as u64))
                .take(HISTOGRAM_DECODED_BYTES as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|e| format!("does not inflate: {e}"))?;
            if out.len() > HISTOGRAM_DECODED_BYTES {
                return Err(format!(
                    "inflates to more than {HISTOGRAM_DECODED_BYTES} bytes"
                ));
            }
            out
        }
        _ => return Err("not an HdrHistogram V2 encoding: InvalidCookie".into()),
    };
    // The V2 header: cookie, payload length, normalizing offset, significant digits,
    // lowest, highest, integer-to-double ratio (40 bytes), then the payload.
    let (Some(V2), Some(payload), Some(digits), Some(low), Some(high)) = (
        be32(&plain, 0),
        be32(&plain, 4),
        be32(&plain, 12),
        be64(&plain, 16),
        be64(&plain, 24),
    ) else {
        return Err("not an HdrHistogram V2 encoding: a short or foreign header".into());
    };
    if payload as usize > plain.len().saturating_sub(40) {
        return Err(format!(
            "a payload of {payload} bytes in {} bytes",
            plain.len()
        ));
    }
    if low != 1 || high > HISTOGRAM_MAX_NS || digits > HISTOGRAM_MAX_DIGITS {
        return Err(format!(
            "a histogram of {low}..={high} at {digits} digits; allowed 1..={HISTOGRAM_MAX_NS} ns at up to {HISTOGRAM_MAX_DIGITS} digits"
        ));
    }
    let h: hdrhistogram::Histogram<u64> = hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut plain.as_slice())
        .map_err(|e| format!("not an HdrHistogram V2 encoding: {e:?}"))?;
    // The decoder sums the counts without overflow (saturating): a total within
    // MAX_FIGURE holds every count within it, and a sum of 1024 agents' within a u64.
    if h.len() > MAX_FIGURE {
        return Err(format!(
            "a histogram of {} values; allowed up to {MAX_FIGURE}",
            h.len()
        ));
    }
    Ok(h)
}
