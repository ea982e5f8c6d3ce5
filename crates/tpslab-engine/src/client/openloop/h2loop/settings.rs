//! A connection's server's SETTINGS as this client obeys them (RFC 9113 6.5.2): how many
//! streams it may have at once, a new stream's send window, the largest frame it may
//! send; and what each SETTINGS frame changed, for the loop to act on (windows of the
//! streams in flight, the header blocks when the HPACK table shrinks).

use crate::client::proto::h2;

/// The server's SETTINGS on one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PeerSettings {
    /// SETTINGS_MAX_CONCURRENT_STREAMS: streams this client may have in flight at once
    /// (None: not named, no limit).
    pub(super) max_streams: Option<u32>,
    /// SETTINGS_INITIAL_WINDOW_SIZE: a new stream's send window, bytes.
    pub(super) window: i64,
    /// SETTINGS_MAX_FRAME_SIZE: the largest frame payload this client may send, bytes.
    pub(super) max_frame: u32,
}

/// What one SETTINGS frame changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Changed {
    /// SETTINGS_HEADER_TABLE_SIZE, bytes (4096, the default, when not named).
    pub(super) table: u32,
    /// SETTINGS_MAX_CONCURRENT_STREAMS as named in this frame (None: not named).
    pub(super) max_streams: Option<u32>,
    /// The change of every open stream's send window, bytes.
    pub(super) window_delta: i64,
}

impl Default for PeerSettings {
    /// Before the server's first SETTINGS: no limit on streams, the default window and
    /// frame size.
    fn default() -> PeerSettings {
        PeerSettings {
            max_streams: None,
            window: h2::DEFAULT_WINDOW,
            max_frame: h2::DEFAULT_MAX_FRAME,
        }
    }
}

impl PeerSettings {
    /// Applies a SETTINGS frame's parameters (its payload, [`h2::Frame::Settings`]).
    /// Errors (connection errors, `http2: ...`): an initial window over 2^31-1, a
    /// maximum frame size outside 16384..=16777215.
    pub(super) fn apply(&mut self, params: &[u8]) -> Result<Changed, String> {
        let mut c = Changed {
            table: 4096,
            max_streams: None,
            window_delta: 0,
        };
        for (id, v) in h2::settings(params) {
            match id {
                h2::setting::HEADER_TABLE_SIZE => c.table = v,
                h2::setting::MAX_CONCURRENT_STREAMS => {
                    self.max_streams = Some(v);
                    c.max_streams = Some(v);
                }
                h2::setting::INITIAL_WINDOW_SIZE => {
                    if v > 0x7fff_ffff {
                        return Err("http2: SETTINGS_INITIAL_WINDOW_SIZE over 2^31-1".into());
                    }
                    c.window_delta += v as i64 - self.window;
                    self.window = v as i64;
                }
                h2::setting::MAX_FRAME_SIZE => {
                    if !(16_384..=16_777_215).contains(&v) {
                        return Err(format!("http2: SETTINGS_MAX_FRAME_SIZE {v}"));
                    }
                    self.max_frame = v;
                }
                _ => {}
            }
        }
        Ok(c)
    }

    /// Whether `open` streams in flight leave room for another.
    pub(super) fn room_for(&self, open: usize) -> bool {
        self.max_streams.is_none_or(|m| (open as u64) < m as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::proto::h2::{parse, Frame};
    use tpslab_record::load_http::Http2Streams;

    /// nginx 1.22.1's first SETTINGS on an h2c connection (captured, as in
    /// `proto::h2`'s tests): MAX_CONCURRENT_STREAMS 128, INITIAL_WINDOW_SIZE 65536,
    /// MAX_FRAME_SIZE 16777215.
    const NGINX_SETTINGS: &[u8] = b"\x00\x00\x12\x04\x00\x00\x00\x00\x00\
        \x00\x03\x00\x00\x00\x80\x00\x04\x00\x01\x00\x00\x00\x05\x00\xff\xff\xff";

    /// A SETTINGS frame of `params` as a server writes it.
    fn settings_frame(params: &[(u16, u32)]) -> Vec<u8> {
        let mut b = vec![];
        h2::write_head(&mut b, params.len() * 6, h2::kind::SETTINGS, 0, 0);
        for (id, v) in params {
            b.extend_from_slice(&id.to_be_bytes());
            b.extend_from_slice(&v.to_be_bytes());
        }
        b
    }

    /// The parameters of the SETTINGS frame at the start of `b`.
    fn params(b: &[u8]) -> &[u8] {
        match parse(b, h2::DEFAULT_MAX_FRAME).unwrap().unwrap().0 {
            Frame::Settings { ack: false, params } => params,
            f => panic!("not SETTINGS: {f:?}"),
        }
    }

    #[test]
    fn nginxs_settings_give_its_stream_limit_window_and_frame_size() {
        let mut p = PeerSettings::default();
        assert!(p.room_for(1_000_000), "no limit before SETTINGS");
        let c = p.apply(params(NGINX_SETTINGS)).unwrap();
        assert_eq!(p.max_streams, Some(128));
        assert_eq!((p.window, p.max_frame), (65_536, 16_777_215));
        assert_eq!(c.max_streams, Some(128));
        assert_eq!(c.window_delta, 65_536 - h2::DEFAULT_WINDOW);
        assert_eq!(c.table, 4096);
        assert!(p.room_for(127));
        assert!(!p.room_for(128));
    }

    #[test]
    fn a_later_settings_lowers_the_limit_and_one_without_it_keeps_it() {
        let mut p = PeerSettings::default();
        let b = settings_frame(&[(h2::setting::MAX_CONCURRENT_STREAMS, 8)]);
        assert_eq!(p.apply(params(&b)).unwrap().max_streams, Some(8));
        assert!(p.room_for(7) && !p.room_for(8));
        // A SETTINGS naming only the table: the limit stays, this frame names none.
        let b = settings_frame(&[(h2::setting::HEADER_TABLE_SIZE, 0)]);
        let c = p.apply(params(&b)).unwrap();
        assert_eq!((c.max_streams, c.table), (None, 0));
        assert_eq!(p.max_streams, Some(8));
        // 0 streams: the server takes none at the moment.
        let b = settings_frame(&[(h2::setting::MAX_CONCURRENT_STREAMS, 0)]);
        p.apply(params(&b)).unwrap();
        assert!(!p.room_for(0));
    }

    #[test]
    fn bad_values_are_connection_errors() {
        let mut p = PeerSettings::default();
        let b = settings_frame(&[(h2::setting::INITIAL_WINDOW_SIZE, 0x8000_0000)]);
        assert!(p.apply(params(&b)).unwrap_err().contains("INITIAL_WINDOW"));
        let b = settings_frame(&[(h2::setting::MAX_FRAME_SIZE, 100)]);
        assert!(p
            .apply(params(&b))
            .unwrap_err()
            .contains("MAX_FRAME_SIZE 100"));
    }

    #[test]
    fn the_record_keeps_the_smallest_and_largest_limit_over_connections() {
        let mut a = Http2Streams::default();
        a.advertised(Some(128), true);
        a.advertised(Some(8), false);
        let mut b = Http2Streams::default();
        b.advertised(None, true);
        b.advertised(Some(100), true);
        b.waited_for_stream = 3;
        b.wait_max_ns = 5;
        a.add(&b);
        assert_eq!((a.connections, a.unlimited), (3, 1));
        assert_eq!(
            (a.max_concurrent_min, a.max_concurrent_max),
            (Some(8), Some(128))
        );
        assert_eq!((a.waited_for_stream, a.wait_max_ns), (3, 5));
        assert_eq!(a.limit(), "8 to 128 (no limit on 1 connection(s))");
        assert!(a.exceeded_by(9) && !a.exceeded_by(8));
        let none = Http2Streams {
            connections: 1,
            unlimited: 1,
            ..Http2Streams::default()
        };
        assert_eq!(none.limit(), "no limit");
        assert!(!none.exceeded_by(1_000));
    }
}
