//! HTTP/2 load's streams: a schedule (a user) due gets a stream on its connection when
//! one is free under the server's SETTINGS_MAX_CONCURRENT_STREAMS, else waits in the
//! connection's queue; a request's HEADERS and body within the flow-control windows; the
//! reply counted, or the stream failed (RST_STREAM, the timeout), and the schedule's next
//! request put on the heap at its time.

use std::cmp::Reverse;

use tpslab_net::mono_ns;

use super::guard::tx_room;
use super::{control, CState, Loop};
use crate::client::books::Books;
use crate::client::proto::h2;
use crate::client::proto::Reply;

impl<B: Books> Loop<'_, '_, B> {
    /// Schedule `i` is due: a stream now if its connection has one free, else it waits
    /// (counted as waiting for a stream when its connection is at its server's limit).
    pub(super) fn due(&mut self, i: usize) {
        if !self.now_may_send() {
            return;
        }
        let k = self.scheds[i].conn;
        if self.can_start(k) {
            let ready = self.scheds[i].ready;
            self.start_stream(i, ready);
        } else {
            if self.at_limit(k) {
                self.queue_for_stream(i);
            }
            self.conns[k].waiting.push_back(i);
        }
    }

    /// Connection `k` takes a new stream now: open, no GOAWAY, a stream free under its
    /// server's limit, and room in its write buffer ([`super::guard::TX_HIGH`]).
    pub(super) fn can_start(&self, k: usize) -> bool {
        let c = &self.conns[k];
        c.state == CState::Open
            && c.goaway.is_none()
            && c.peer.room_for(c.streams.len())
            && c.next_sid <= 0x7fff_ffff
            && tx_room(c.tx.len(), c.tx_off)
    }

    /// Connection `k` is open (no GOAWAY) with as many streams in flight as its server
    /// allows (SETTINGS_MAX_CONCURRENT_STREAMS).
    fn at_limit(&self, k: usize) -> bool {
        let c = &self.conns[k];
        c.state == CState::Open && c.goaway.is_none() && !c.peer.room_for(c.streams.len())
    }

    /// Schedule `i` waits on the client for a free stream: since it was due, or since
    /// its connection opened if it waited for that first. A request that waited for a
    /// stream already (on a connection since closed) keeps its first wait's start: its
    /// timeout and its wait count from then, however many connections it waits on.
    fn queue_for_stream(&mut self, i: usize) {
        if self.scheds[i].queued_at != 0 {
            return;
        }
        let since = self.scheds[i]
            .next_at
            .max(self.conns[self.scheds[i].conn].opened_at);
        self.scheds[i].queued_at = since.max(1);
        self.seen_now().waited_for_stream += 1;
    }

    /// Schedule `i` no longer waits for a stream at `now` (its stream starts, or it is
    /// given up at its timeout): the wait's length is kept if the longest.
    pub(super) fn dequeued(&mut self, i: usize, now: u64) {
        let q = std::mem::take(&mut self.scheds[i].queued_at);
        if q != 0 {
            let s = self.seen_now();
            s.wait_max_ns = s.wait_max_ns.max(now.saturating_sub(q));
        }
    }

    /// Starts the schedules waiting on connection `k` while it has streams free; once it
    /// is open, those left wait for a stream.
    pub(super) fn drain_waiting(&mut self, k: usize) {
        while self.can_start(k) {
            let Some(i) = self.conns[k].waiting.pop_front() else {
                break;
            };
            if !self.now_may_send() {
                self.conns[k].waiting.clear();
                return;
            }
            // It waited for the connection (or a stream), not for the generator.
            let now = mono_ns();
            if self.queue_expired(i, now) {
                self.queue_timed_out(i, now);
                continue;
            }
            self.dequeued(i, now);
            self.start_stream(i, now);
        }
        if !self.conns[k].swept && self.conns[k].state == CState::Open {
            self.conns[k].swept = true;
            if self.at_limit(k) {
                for j in 0..self.conns[k].waiting.len() {
                    let i = self.conns[k].waiting[j];
                    if self.scheds[i].queued_at == 0 {
                        self.queue_for_stream(i);
                    }
                }
            }
        }
    }

    /// A new stream for schedule `i`: its HEADERS (and as much body as the windows let).
    /// Under a cap on the requests used up, nothing starts (the run is ending).
    pub(super) fn start_stream(&mut self, i: usize, ready: u64) {
        if !self.run.sched.claim() {
            return;
        }
        let now = mono_ns();
        let k = self.scheds[i].conn;
        let c = &mut self.conns[k];
        let sid = c.next_sid;
        c.next_sid += 2;
        let block = if c.first_sent {
            &c.blocks.1
        } else {
            &c.blocks.0
        };
        c.first_sent = true;
        let body = !self.run.body.is_empty();
        let n = h2::headers(&mut c.tx, sid, block, !body, c.peer.max_frame);
        c.streams.insert(sid, i);
        c.guard.started();
        let window = c.peer.window;
        let u = &mut self.scheds[i];
        u.sid = sid;
        u.t0 = now;
        u.ready = ready;
        u.intended = if u.next_at == 0 { now } else { u.next_at };
        u.status = 0;
        u.bytes = n;
        u.body_off = 0;
        u.window = window;
        u.sent = false;
        u.recv_unacked = 0;
        if self.send_body(i) {
            self.mark_sent(i);
        } else {
            self.conns[k].blocked.push_back(i);
        }
    }

    /// Sends what the windows let of stream `i`'s body, while its connection's write
    /// buffer has room: true when all of it is written.
    pub(super) fn send_body(&mut self, i: usize) -> bool {
        let body = &self.run.body;
        let u = &mut self.scheds[i];
        let c = &mut self.conns[u.conn];
        while u.body_off < body.len() {
            let n = (body.len() - u.body_off)
                .min(c.send_window.max(0) as usize)
                .min(u.window.max(0) as usize)
                .min(c.peer.max_frame as usize);
            if n == 0 || !tx_room(c.tx.len(), c.tx_off) {
                return false;
            }
            let end = u.body_off + n == body.len();
            h2::data(&mut c.tx, u.sid, &body[u.body_off..u.body_off + n], end);
            u.body_off += n;
            u.bytes += h2::HEAD + n;
            c.send_window -= n as i64;
            u.window -= n as i64;
        }
        true
    }

    pub(super) fn mark_sent(&mut self, i: usize) {
        let u = &mut self.scheds[i];
        u.sent = true;
        self.run
            .sched
            .sent(&mut self.local, u.intended, u.ready, mono_ns(), u.bytes);
    }

    /// Streams of connection `k` waiting for window: sent as far as it now lets.
    pub(super) fn unblock(&mut self, k: usize) {
        for _ in 0..self.conns[k].blocked.len() {
            let Some(i) = self.conns[k].blocked.pop_front() else {
                return;
            };
            if self.scheds[i].sid == 0 {
                continue;
            }
            if self.send_body(i) {
                self.mark_sent(i);
            } else {
                self.conns[k].blocked.push_back(i);
            }
        }
    }

    /// Stream of schedule `i` is over: its next request at its time.
    pub(super) fn end_stream(&mut self, i: usize, now: u64) {
        let u = &mut self.scheds[i];
        let k = u.conn;
        let sid = u.sid;
        u.sid = 0;
        u.retried = false;
        u.ready = now;
        u.next_at = self.run.sched.next_due(u.intended, now);
        let at = u.next_at;
        self.heap.push(Reverse((at, i)));
        let c = &mut self.conns[k];
        c.streams.remove(&sid);
        if !self.scheds[i].sent {
            c.blocked.retain(|&b| b != i);
        }
    }

    pub(super) fn answered(&mut self, i: usize) {
        let now = mono_ns();
        let u = &self.scheds[i];
        let (t0, failed) = match self.run.closed {
            true => (
                u.intended,
                crate::client::proto::http1::status_failure(u.status),
            ),
            false => (u.t0, None),
        };
        let r = Reply {
            status: u.status,
            failed,
            ..Reply::ok(0)
        };
        self.run
            .sched
            .answered(&mut self.local, u.intended, t0, 0, now, &r);
        self.conns[u.conn].served = true;
        self.end_stream(i, now);
    }

    /// Stream of schedule `i` failed with `kind`; `rst`: tell the server (RST_STREAM
    /// CANCEL).
    pub(super) fn stream_failed(&mut self, i: usize, kind: &str, now: u64, rst: bool) {
        let u = &self.scheds[i];
        self.run.sched.failed(&mut self.local, now, kind, u.sent);
        if !u.sent {
            self.run.sched.abandoned();
        }
        if rst {
            let (k, sid) = (u.conn, u.sid);
            control(
                self.run.sched,
                &mut self.local,
                &mut self.conns[k].tx,
                |t| h2::rst_stream(t, sid, h2::CANCEL),
            );
        }
        self.end_stream(i, now);
    }

    /// Schedule `i` has waited for a free stream for the timeout or longer at `now`.
    fn queue_expired(&self, i: usize, now: u64) -> bool {
        let q = self.scheds[i].queued_at;
        q != 0 && now >= q + self.timeout_ns
    }

    /// Schedule `i`, out of its connection's queue, waited for a stream past the timeout:
    /// its request fails as `timeout` (never sent: as HTTP/1.1's request without its reply
    /// in time counts), its next at its time.
    fn queue_timed_out(&mut self, i: usize, now: u64) {
        self.dequeued(i, now);
        self.seen_now().timed_out_waiting += 1;
        self.run
            .sched
            .failed(&mut self.local, now, "timeout", false);
        let u = &mut self.scheds[i];
        // The request given up was due at `next_at`.
        u.intended = u.next_at;
        u.ready = now;
        u.next_at = self.run.sched.next_due(u.intended, now);
        self.heap.push(Reverse((u.next_at, i)));
    }

    /// Streams past their timeout are cancelled; schedules that waited on the client for
    /// a free stream past theirs fail as timeouts too; connects past theirs fail.
    pub(super) fn timeouts(&mut self, now: u64) {
        for i in 0..self.scheds.len() {
            let u = &self.scheds[i];
            if u.sid != 0 && now >= u.t0 + self.timeout_ns {
                self.stream_failed(i, "timeout", now, true);
                let k = self.scheds[i].conn;
                self.drain_waiting(k);
            }
        }
        if self.now_may_send() {
            for k in 0..self.conns.len() {
                let w = &self.conns[k].waiting;
                if w.iter().any(|&i| self.queue_expired(i, now)) {
                    let (gone, kept) = w.iter().partition(|&&i| self.queue_expired(i, now));
                    self.conns[k].waiting = kept;
                    for i in gone {
                        self.queue_timed_out(i, now);
                    }
                }
            }
        }
        for k in 0..self.conns.len() {
            let c = &self.conns[k];
            if c.deadline != 0 && now >= c.deadline {
                let kind = if c.state == CState::Settings {
                    "http2: no SETTINGS from the server within the timeout"
                } else {
                    "timeout"
                };
                self.connect_failed(k, kind);
            }
        }
    }
}
