//! One tracepoint sampled on one CPU into a perf ring buffer: every event's raw record
//! (`PERF_SAMPLE_RAW`, the tracepoint's fields as its `format` file lays them out), for
//! events too frequent to count with one filtered counter per value (each filter is
//! evaluated on every event). The kernel writes each record once; a reader drains the
//! ring and says how many records the kernel could not write because it was full.

use crate::NetError;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::perf::{PerfEventAttr as Attr, PERF_FLAG_FD_CLOEXEC, PERF_TYPE_TRACEPOINT};

const PERF_SAMPLE_RAW: u64 = 1 << 10;
/// attr.flags bit: wake readers by bytes written (`wakeup_watermark`), not per event.
const FLAG_WATERMARK: u64 = 1 << 14;
const PERF_RECORD_LOST: u32 = 2;
const PERF_RECORD_SAMPLE: u32 = 9;
/// Offsets in `struct perf_event_mmap_page` (include/uapi/linux/perf_event.h).
const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;
const DATA_OFFSET: usize = 1040;
const DATA_SIZE: usize = 1048;

/// A tracepoint sampled on one CPU: every event, into a ring of `pages` pages.
#[derive(Debug)]
pub struct RawSampler {
    _fd: OwnedFd,
    base: *mut u8,
    map_len: usize,
    data_offset: usize,
    data_size: usize,
    tail: u64,
}

// SAFETY: the mapping belongs to this value alone; the kernel writes the data area and
// `data_head`, this value reads them and writes `data_tail`, from whichever thread holds it.
unsafe impl Send for RawSampler {}

impl RawSampler {
    /// Samples tracepoint `id` on CPU `cpu` (every process), every event, into a ring of
    /// `pages` pages (a power of two). Errors: EACCES/EPERM (not root), ENODEV (CPU
    /// offline), ENOMEM (mlock limit for perf rings).
    pub fn open(id: u64, cpu: u32, pages: usize) -> Result<RawSampler, NetError> {
        if !pages.is_power_of_two() {
            return Err(NetError::Invalid(format!(
                "perf ring of {pages} pages: a power of two"
            )));
        }
        let attr = Attr {
            type_: PERF_TYPE_TRACEPOINT,
            size: std::mem::size_of::<Attr>() as u32,
            config: id,
            sample_period: 1,
            sample_type: PERF_SAMPLE_RAW,
            // Nobody sleeps on the ring (the reader polls it): a wake-up per event would
            // cost more than the event; wake only when half of the ring is written.
            flags: FLAG_WATERMARK,
            wakeup_events: (pages * crate::page_size() as usize / 2) as u32,
            ..Default::default()
        };
        // SAFETY: attr is a valid perf_event_attr of the size it states; read only.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const Attr,
                -1 as libc::pid_t,
                cpu as libc::c_int,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(NetError::last(format!(
                "perf_event_open(tracepoint {id} sampled, cpu {cpu})"
            )));
        }
        // SAFETY: a new descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        let page = crate::page_size() as usize;
        let map_len = (1 + pages) * page;
        // SAFETY: mapping a perf event's ring: length (1 + 2^n) pages, shared, on a valid
        // descriptor; the result is checked before use and unmapped in Drop.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(NetError::last(format!("mmap of a {pages}-page perf ring")));
        }
        let base = base as *mut u8;
        // SAFETY: the first page is the kernel's perf_event_mmap_page, mapped above.
        let (off, size) = unsafe {
            (
                std::ptr::read_volatile(base.add(DATA_OFFSET) as *const u64) as usize,
                std::ptr::read_volatile(base.add(DATA_SIZE) as *const u64) as usize,
            )
        };
        let (data_offset, data_size) = if size > 0 {
            (off, size)
        } else {
            (page, pages * page)
        };
        Ok(RawSampler {
            _fd: fd,
            base,
            map_len,
            data_offset,
            data_size,
            tail: 0,
        })
    }

    /// Waits until the kernel wakes a reader of any of `rings` (half of one written: the
    /// watermark set at open), `wake` is readable (the owner wants the reader back), or
    /// `timeout` passes, whichever is first; a signal ends the wait early. Errors: poll(2)
    /// failed otherwise.
    pub fn wait_any(
        rings: &[RawSampler],
        wake: std::os::fd::BorrowedFd<'_>,
        timeout: std::time::Duration,
    ) -> Result<(), NetError> {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        let mut fds: Vec<PollFd<'_>> = rings
            .iter()
            .map(|r| PollFd::new(&r._fd, PollFlags::IN))
            .collect();
        fds.push(PollFd::from_borrowed_fd(wake, PollFlags::IN));
        let t = Timespec {
            tv_sec: timeout.as_secs() as i64,
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        match poll(&mut fds, Some(&t)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => Ok(()),
            Err(e) => Err(NetError::io("poll of perf rings", std::io::Error::from(e))),
        }
    }

    fn word(&self, at: usize) -> &AtomicU64 {
        // SAFETY: `at` is DATA_HEAD or DATA_TAIL, 8-aligned fields of the mapped first
        // page, which lives as long as self.
        unsafe { &*(self.base.add(at) as *const AtomicU64) }
    }

    /// Copies `out.len()` bytes of the data area starting at ring position `pos`
    /// (wrapping at its end).
    fn copy(&self, pos: u64, out: &mut [u8]) {
        let size = self.data_size;
        let start = (pos % size as u64) as usize;
        let first = out.len().min(size - start);
        // SAFETY: both ranges lie inside the mapped data area (start < size, first <=
        // size - start, the rest from its beginning, out.len() <= size).
        unsafe {
            let data = self.base.add(self.data_offset);
            std::ptr::copy_nonoverlapping(data.add(start), out.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(data, out.as_mut_ptr().add(first), out.len() - first);
        }
    }

    /// Hands every raw record written since the last call to `f`, frees the ring, and
    /// returns how many records the kernel reported lost (the ring was full).
    pub fn drain(&mut self, f: &mut dyn FnMut(&[u8])) -> u64 {
        let head = self.word(DATA_HEAD).load(Ordering::Acquire);
        let mut lost = 0;
        let mut rec = Vec::new();
        while self.tail + 8 <= head {
            let mut hdr = [0u8; 8];
            self.copy(self.tail, &mut hdr);
            let ty = u32::from_ne_bytes(hdr[..4].try_into().expect("4 bytes"));
            let size = usize::from(u16::from_ne_bytes(hdr[6..8].try_into().expect("2 bytes")));
            if size < 8 || size > self.data_size {
                // Not a record boundary: give up on what is there rather than misread.
                self.tail = head;
                break;
            }
            rec.resize(size - 8, 0);
            self.copy(self.tail + 8, &mut rec);
            match ty {
                PERF_RECORD_SAMPLE if rec.len() >= 4 => {
                    let n = u32::from_ne_bytes(rec[..4].try_into().expect("4 bytes")) as usize;
                    if let Some(raw) = rec.get(4..4 + n) {
                        f(raw);
                    }
                }
                PERF_RECORD_LOST if rec.len() >= 16 => {
                    lost += u64::from_ne_bytes(rec[8..16].try_into().expect("8 bytes"));
                }
                _ => {}
            }
            self.tail += size as u64;
        }
        self.word(DATA_TAIL).store(self.tail, Ordering::Release);
        lost
    }
}

impl Drop for RawSampler {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in open, once.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.map_len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_is_a_power_of_two_pages() {
        let e = RawSampler::open(1, 0, 3).unwrap_err().to_string();
        assert!(e.contains("3 pages: a power of two"), "{e}");
    }
}
