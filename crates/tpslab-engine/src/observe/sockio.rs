//! Exact counts of the UDP datagrams a process's threads read and sent, whatever else
//! runs on the host: the `sock:sock_recv_length` and `sock:sock_send_length` tracepoints
//! (kernel 6.4+) counted per thread with perf_event_open, filtered to UDP
//! (see [`tpslab_net::perf`]).
//!
//! The counters are opened on every thread the process has when they are attached, with
//! inheritance, so threads those create later are counted too. A recvmmsg/sendmmsg of N
//! datagrams counts N (the tracepoints fire per message); a GRO read of coalesced
//! datagrams or a GSO send counts 1.

use tpslab_net::perf::{
    tracepoint_id, TracepointGroup, UDP_READ_FILTER, UDP_SEND_FAILED_FILTER, UDP_SENT_FILTER,
};

/// Datagram counts of a set of threads at one instant (since the counters were opened).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UdpIo {
    /// UDP datagrams read (recv*/read returning >= 0, not MSG_PEEK).
    pub read: u64,
    /// UDP datagrams sent (send* returning >= 0).
    pub sent: u64,
    /// UDP sends that failed (send* returning an error).
    pub send_failed: u64,
}

/// One thread's three counters (read, sent, send failed: one group, read by one
/// read(2)) and their values at the last read.
#[derive(Debug)]
struct ThreadCounters {
    tid: u32,
    group: TracepointGroup,
    last: UdpIo,
    /// Its values at the last full read (idleness is judged between full reads).
    last_full: UdpIo,
    /// Full reads since its counts last moved: a thread that moved within the last
    /// [`HOT_FULL_READS`] full reads is read at every sample.
    idle_full_reads: u32,
}

/// A thread whose counts moved within this many full reads (1 s at the observer's
/// 100 ms full-read period) is read at every sample.
const HOT_FULL_READS: u32 = 10;

/// Counters on the threads of one process (or a given set of threads).
#[derive(Debug)]
pub struct ProcessUdpIo {
    threads: Vec<ThreadCounters>,
    /// Human description of where the counts come from, for the record.
    pub source: String,
}

impl ProcessUdpIo {
    /// Opens the counters on `tids` (`inherit`: and on the threads they create later).
    /// Errors: the tracepoints do not exist (kernel < 6.4), perf_event_open is refused
    /// (not root), or no thread could be attached.
    pub fn attach(tids: &[u32], inherit: bool) -> Result<ProcessUdpIo, tpslab_net::NetError> {
        let rid = tracepoint_id("sock", "sock_recv_length")?;
        // Three descriptors a thread: a JVM with hundreds of threads needs more than the
        // default soft limit of 1024.
        tpslab_net::raise_nofile();
        let sid = tracepoint_id("sock", "sock_send_length")?;
        let mut threads = vec![];
        let mut last_err = None;
        for &tid in tids {
            let open = || -> Result<ThreadCounters, tpslab_net::NetError> {
                let events = [
                    (rid, UDP_READ_FILTER),
                    (sid, UDP_SENT_FILTER),
                    (sid, UDP_SEND_FAILED_FILTER),
                ];
                Ok(ThreadCounters {
                    tid,
                    group: TracepointGroup::open(&events, tid, inherit)?,
                    last: UdpIo::default(),
                    last_full: UdpIo::default(),
                    idle_full_reads: 0,
                })
            };
            match open() {
                Ok(t) => threads.push(t),
                // A thread that ended meanwhile is not an error.
                Err(e) if e.errno() == Some(libc::ESRCH) => {}
                Err(e) => last_err = Some(e),
            }
        }
        if let Some(e) = last_err {
            return Err(e);
        }
        if threads.is_empty() {
            return Err(tpslab_net::NetError::Invalid(
                "no thread of the process could be counted (it ended?)".into(),
            ));
        }
        let n = threads.len();
        Ok(ProcessUdpIo {
            threads,
            source: format!(
                "tracepoints sock:sock_recv_length / sock:sock_send_length (UDP) counted on the server's {n} thread(s) with perf_event_open"
            ),
        })
    }

    /// Threads whose read count is above zero: the server's reading threads.
    pub fn reader_threads(&self) -> usize {
        self.threads.iter().filter(|t| t.last.read > 0).count()
    }

    /// Each counted thread's UDP reads at the last read, (thread id, datagrams). With
    /// inheritance a thread's count includes the threads it created after the attach.
    pub fn reads_by_thread(&self) -> Vec<(u32, u64)> {
        self.threads.iter().map(|t| (t.tid, t.last.read)).collect()
    }

    /// Attaches to every thread of process `pid`, with inheritance.
    pub fn attach_pid(pid: u32) -> Result<ProcessUdpIo, tpslab_net::NetError> {
        ProcessUdpIo::attach(&tpslab_proc::live::task_ids(pid), true)
    }

    /// Current totals. `full`: read every thread's counters; else only those that moved
    /// within the last ten full reads (the others keep their last value until the next
    /// full read): a process with many idle threads (a JVM) costs a few reads a sample.
    pub fn read(&mut self, full: bool) -> UdpIo {
        let mut total = UdpIo::default();
        for t in &mut self.threads {
            if full || t.idle_full_reads < HOT_FULL_READS {
                let mut v = [0u64; 3];
                let now = match t.group.read(&mut v) {
                    Ok(()) => UdpIo {
                        read: v[0],
                        sent: v[1],
                        send_failed: v[2],
                    },
                    Err(_) => t.last,
                };
                if full {
                    t.idle_full_reads = if now != t.last_full {
                        0
                    } else {
                        t.idle_full_reads.saturating_add(1)
                    };
                    t.last_full = now;
                }
                t.last = now;
            }
            total.read += t.last.read;
            total.sent += t.last.sent;
            total.send_failed += t.last.send_failed;
        }
        total
    }
}
