//! HTTP/2 load's frames as a connection reads them: each whole frame cut out of its
//! bytes ([`h2::parse`]) and handled (the server's SETTINGS, PING, WINDOW_UPDATE, header
//! blocks across CONTINUATION, DATA, RST_STREAM, GOAWAY); a reply's `:status` decoded by
//! the connection's HPACK decoder. Each frame is counted against the connection's limits
//! ([`super::guard`]): a server past one is a [`Fault`].

use tpslab_net::mono_ns;

use super::guard::{Fault, Flood, MAX_CONTINUATIONS, MAX_HEADER_BLOCK, MAX_SETTINGS_PARAMS};
use super::{control, CState, Loop};
use crate::client::books::Books;
use crate::client::proto::h2::{self, Frame};

impl<B: Books> Loop<'_, '_, B> {
    /// Handles the whole frames read on connection `k` (the rest kept for the next read).
    pub(super) fn frames(&mut self, k: usize) -> Result<(), Fault> {
        let now = mono_ns();
        let mut at = 0;
        let mut rx = std::mem::take(&mut self.conns[k].rx);
        let end = self.conns[k].rx_end;
        let r = loop {
            if self.conns[k].state == CState::Settings
                && end - at >= 5
                && rx[at..].starts_with(b"HTTP/")
            {
                self.run.fatal(format!(
                    "{}: the server answered HTTP/2's preface with HTTP/1.x: it does not take h2c with prior knowledge (drop --http2, or use its https:// URL)",
                    self.run.url
                ));
                break Ok(());
            }
            match h2::parse(&rx[at..end], h2::DEFAULT_MAX_FRAME) {
                Ok(Some((f, n))) => {
                    at += n;
                    if let Err(e) = self.frame(k, f, now) {
                        break Err(e);
                    }
                    if self.conns[k].sock.is_none() {
                        break Ok(());
                    }
                }
                Ok(None) => break Ok(()),
                Err(e) => break Err(Fault::Protocol(e)),
            }
        };
        rx.copy_within(at..end, 0);
        let c = &mut self.conns[k];
        c.rx = rx;
        if c.sock.is_some() {
            c.rx_end = end - at;
        }
        if r.is_ok() && c.sock.is_some() {
            self.drain_waiting(k);
            self.unblock(k);
            let c = &self.conns[k];
            if c.goaway.is_some() && c.streams.is_empty() {
                // A server that answered nothing on it is not called at once again.
                let served = c.served;
                self.close(k, !served);
            }
        }
        r
    }

    /// Handles frame `f` of connection `k`, read at `now` (ns).
    pub(super) fn frame(&mut self, k: usize, f: Frame<'_>, now: u64) -> Result<(), Fault> {
        let c = &mut self.conns[k];
        if c.state == CState::Settings && !matches!(f, Frame::Settings { ack: false, .. }) {
            return Err("http2: the server's first frame is not SETTINGS"
                .to_string()
                .into());
        }
        if c.hdr_sid != 0
            && !matches!(
                f,
                Frame::Headers {
                    continuation: true,
                    ..
                }
            )
        {
            return Err("http2: a header block cut by another frame"
                .to_string()
                .into());
        }
        match f {
            // We never PING, and SETTINGS only once.
            Frame::Settings { ack: true, .. }
            | Frame::Ping { ack: true, .. }
            | Frame::Other { .. } => c.guard.frame(Flood::Empty, now)?,
            Frame::Settings { ack: false, params } => self.settings(k, params, now)?,
            Frame::Ping { ack: false, data } => {
                c.guard.frame(Flood::Ping, now)?;
                c.guard.ack(Flood::Ping)?;
                control(self.run.sched, &mut self.local, &mut c.tx, |t| {
                    h2::ping_ack(t, &data)
                })
            }
            Frame::WindowUpdate {
                stream: 0,
                increment,
            } => {
                c.guard.frame(Flood::WindowUpdate, now)?;
                c.send_window += increment as i64;
                if c.send_window > 0x7fff_ffff {
                    return Err("http2: the connection's window over 2^31-1"
                        .to_string()
                        .into());
                }
            }
            Frame::WindowUpdate { stream, increment } => {
                c.guard.frame(Flood::WindowUpdate, now)?;
                if let Some(&i) = c.streams.get(&stream) {
                    self.scheds[i].window += increment as i64;
                }
            }
            Frame::Headers {
                stream,
                end_stream,
                end_headers,
                continuation,
                block,
            } => {
                if continuation && c.hdr_sid != stream {
                    return Err("http2: a CONTINUATION without its HEADERS"
                        .to_string()
                        .into());
                }
                if !continuation && end_headers {
                    // The usual case: one frame, decoded in place.
                    let st = c.dec.status(block)?;
                    return self.headers_done(k, stream, end_stream, st);
                }
                return self.header_piece(
                    k,
                    (stream, end_stream, end_headers),
                    continuation,
                    block,
                );
            }
            Frame::Data {
                stream,
                end,
                flow,
                data,
            } => self.data(k, (stream, end, flow), data.is_empty(), now)?,
            Frame::Reset { stream, code } => {
                if let Some(&i) = c.streams.get(&stream) {
                    let kind = format!("stream reset (RST_STREAM {})", h2::code_name(code));
                    self.stream_failed(i, &kind, mono_ns(), false);
                } else if stream.is_multiple_of(2) || stream >= c.next_sid {
                    // RFC 9113 6.4: a reset of an idle stream is a connection error.
                    return Err(format!("http2: RST_STREAM on idle stream {stream}").into());
                } else {
                    c.guard.frame(Flood::Reset, now)?;
                }
            }
            Frame::GoAway { last, code } => self.goaway(k, last, code, now)?,
        }
        Ok(())
    }

    /// The server's SETTINGS (not an ack) on connection `k`, read at `now` (ns): applied
    /// and acknowledged; the first opens the connection.
    fn settings(&mut self, k: usize, params: &[u8], now: u64) -> Result<(), Fault> {
        let c = &mut self.conns[k];
        c.guard.frame(Flood::Settings, now)?;
        if params.len() / 6 > MAX_SETTINGS_PARAMS {
            return Err(Flood::Settings.into());
        }
        c.guard.ack(Flood::Settings)?;
        let ch = c.peer.apply(params)?;
        if ch.window_delta != 0 {
            for &i in c.streams.values() {
                self.scheds[i].window += ch.window_delta;
            }
        }
        control(self.run.sched, &mut self.local, &mut c.tx, h2::settings_ack);
        let first = c.state == CState::Settings;
        if first || ch.max_streams.is_some() {
            let at = super::step_at(&self.starts, mono_ns());
            self.seen[at].advertised(ch.max_streams, first);
        }
        if first {
            c.state = CState::Open;
            c.deadline = 0;
            c.opened_at = mono_ns();
            c.blocks = h2::header_blocks(&self.run.headers, ch.table);
        } else if ch.table < 4096 && c.blocks.1.first() != Some(&0) {
            // Indexing stops: the next block says so with a size update.
            c.blocks = h2::header_blocks(&self.run.headers, ch.table);
            c.first_sent = false;
        }
        Ok(())
    }

    /// A piece of a header block cut over frames on connection `k`: (its stream,
    /// END_STREAM, END_HEADERS), whether it is a CONTINUATION, its bytes. Kept until the
    /// block is whole, then decoded.
    fn header_piece(
        &mut self,
        k: usize,
        (stream, end_stream, end_headers): (u32, bool, bool),
        continuation: bool,
        block: &[u8],
    ) -> Result<(), Fault> {
        let c = &mut self.conns[k];
        if !continuation {
            c.hdr_sid = stream;
            c.hdr_end_stream = end_stream;
            c.hdr.clear();
            c.hdr_frames = 0;
        } else {
            c.hdr_frames += 1;
            if c.hdr_frames > MAX_CONTINUATIONS {
                return Err(Flood::Continuation.into());
            }
        }
        if c.hdr.len() + block.len() > MAX_HEADER_BLOCK {
            return Err(Flood::HeaderBlock.into());
        }
        c.hdr.extend_from_slice(block);
        if end_headers {
            let b = std::mem::take(&mut c.hdr);
            let end_stream = c.hdr_end_stream;
            c.hdr_sid = 0;
            let st = c.dec.status(&b);
            c.hdr = b;
            return self.headers_done(k, stream, end_stream, st?);
        }
        Ok(())
    }

    /// A DATA frame on connection `k`: (its stream, END_STREAM, the bytes flow control
    /// counts), whether it carried no data, read at `now` (ns). The windows given back
    /// once half used; END_STREAM answers the stream.
    #[inline]
    fn data(
        &mut self,
        k: usize,
        (stream, end, flow): (u32, bool, u32),
        empty: bool,
        now: u64,
    ) -> Result<(), Fault> {
        let c = &mut self.conns[k];
        if !c.streams.contains_key(&stream) && (stream.is_multiple_of(2) || stream >= c.next_sid) {
            // RFC 9113 5.1: DATA on an idle stream is a connection error.
            return Err(format!("http2: DATA on idle stream {stream}").into());
        }
        if empty && (!end || !c.streams.contains_key(&stream)) {
            // Nothing carried, nothing ended: an empty frame (END_STREAM on a
            // stream closed already ends nothing).
            c.guard.frame(Flood::Empty, now)?;
        }
        c.recv_unacked += flow;
        if c.recv_unacked >= h2::RECV_WINDOW / 2 {
            let n = c.recv_unacked;
            control(self.run.sched, &mut self.local, &mut c.tx, |t| {
                h2::window_update(t, 0, n)
            });
            c.recv_unacked = 0;
        }
        if let Some(&i) = c.streams.get(&stream) {
            if end {
                self.answered(i);
            } else {
                let u = &mut self.scheds[i];
                u.recv_unacked += flow;
                if u.recv_unacked >= h2::RECV_WINDOW / 2 {
                    let n = u.recv_unacked;
                    control(self.run.sched, &mut self.local, &mut c.tx, |t| {
                        h2::window_update(t, stream, n)
                    });
                    u.recv_unacked = 0;
                }
            }
        }
        Ok(())
    }

    /// A GOAWAY on connection `k` (the last stream the server processes, its error code),
    /// read at `now` (ns): the streams above `last` sent again on a new connection, once;
    /// a request refused so a second time fails.
    fn goaway(&mut self, k: usize, last: u32, code: u32, now: u64) -> Result<(), Fault> {
        let c = &mut self.conns[k];
        let first = match c.goaway {
            None => true,
            // RFC 9113 6.8: a later GOAWAY never names a higher last stream.
            Some(was) if last > was => {
                return Err(format!(
                    "http2: a GOAWAY's last stream {last} above the one before ({was})"
                )
                .into())
            }
            Some(_) => {
                c.guard.frame(Flood::Empty, now)?;
                false
            }
        };
        c.goaway = Some(last);
        // Streams above `last` were not processed: sent again on a new connection,
        // once; a request refused so a second time fails (`refused`).
        let mut again: Vec<(u32, usize)> = c
            .streams
            .iter()
            .filter(|(&sid, _)| sid > last)
            .map(|(&s, &i)| (s, i))
            .collect();
        again.sort_unstable();
        let (mut retried, mut refused) = (0, vec![]);
        for &(sid, i) in again.iter().rev() {
            let u = &mut self.scheds[i];
            if u.retried {
                refused.push(i);
                continue;
            }
            c.streams.remove(&sid);
            if u.sent {
                self.run.sched.unsent(&mut self.local);
            }
            u.sid = 0;
            u.sent = false;
            u.retried = true;
            retried += 1;
            // Started again on another connection: claimed again then.
            self.run.sched.unclaim();
            // Its intended time is kept: the wait for a new connection is latency.
            u.next_at = u.intended;
            c.blocked.retain(|&b| b != i);
            c.waiting.push_front(i);
        }
        let seen = self.seen_now();
        seen.goaway_retried += retried;
        seen.goaway_refused += refused.len() as u64;
        for i in refused {
            self.stream_failed(
                i,
                "http2: refused by GOAWAY twice (not processed)",
                now,
                false,
            );
        }
        let c = &mut self.conns[k];
        // The connection's failure, once (no request of it failed): a GOAWAY
        // repeated counted again would make failures no request had.
        if first && code != 0 && c.streams.is_empty() {
            self.run.sched.failed(
                &mut self.local,
                mono_ns(),
                &format!("connect: http2: GOAWAY {}", h2::code_name(code)),
                false,
            );
        }
        Ok(())
    }

    /// A whole header block on `stream` with status `st`: an interim 1xx is skipped, the
    /// first final one is the reply's status; END_STREAM ends the stream.
    pub(super) fn headers_done(
        &mut self,
        k: usize,
        stream: u32,
        end_stream: bool,
        st: Option<u16>,
    ) -> Result<(), Fault> {
        let now = || mono_ns();
        let c = &mut self.conns[k];
        let Some(&i) = c.streams.get(&stream) else {
            if stream.is_multiple_of(2) || stream >= c.next_sid {
                // RFC 9113 5.1: HEADERS on an idle stream (the server cannot open one).
                return Err(format!("http2: HEADERS on idle stream {stream}").into());
            }
            // A reply's headers on a stream closed already (cancelled at its timeout):
            // nothing to do, and counted as an empty frame.
            c.guard.frame(Flood::Empty, now())?;
            return Ok(());
        };
        let u = &mut self.scheds[i];
        match st {
            Some(s) if (100..200).contains(&s) => {
                // An interim reply: as many as the budget of frames that advance nothing.
                c.guard.frame(Flood::Empty, now())?;
            }
            Some(s) if u.status == 0 => u.status = s,
            None if u.status == 0 => {
                let now = mono_ns();
                self.stream_failed(i, "http2: a reply without :status", now, true);
                return Ok(());
            }
            _ => {}
        }
        if end_stream {
            self.answered(i);
        }
        Ok(())
    }
}
