//! Overwrite-mode perf rings, as `perf record --overwrite` keeps them: each CPU's tracepoints
//! write backward (`write_backward`) into one ring mapped read-only, so the kernel keeps the
//! newest events and overwrites the oldest, and nobody reads anything until a window is asked
//! for. Then the ring is paused (`PERF_EVENT_IOC_PAUSE_OUTPUT`), walked from its head (the
//! newest record) back to the window's start, the window's records decoded, and the ring
//! resumed. perf-event2 has neither `write_backward` nor a read-only map, so the small mmap and
//! the record parser are here, over perf-event-open-sys. Opened on the thread that starts the
//! tracer; read on the thread that asks for a window (record's main thread).

use crate::decode::{Decoder, EventSpec};
use crate::event::{EventKind, TraceEvent};
use crate::format::EventFormat;
use crate::perf::refused;
use crate::setup::TraceUnavailable;
use perf_event_open_sys::bindings as sys;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{fence, Ordering};

/// `struct perf_event_header`: type, misc, size (bytes, a multiple of 8, header included).
const HEADER: usize = 8;

/// One CPU's backward ring and the events that write into it.
pub(crate) struct BackwardRing {
    pub(crate) cpu: usize,
    /// The event whose ring the others write into (`PERF_EVENT_IOC_SET_OUTPUT`).
    leader: OwnedFd,
    /// Kept open: closing an event stops it.
    redirected: Vec<OwnedFd>,
    /// The mapping: one metadata page, then `data_size` bytes of ring.
    base: *mut u8,
    map_len: usize,
    data_offset: usize,
    data_size: usize,
    /// Where a record that wraps past the ring's end is put together.
    scratch: Vec<u8>,
}

// SAFETY: the mapping is owned by this value alone (nothing else holds `base`), and the kernel
// writes it from any CPU anyway; moving the owner to another thread changes nothing.
unsafe impl Send for BackwardRing {}

/// What one walk of a ring found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Walk {
    /// The walk reached a record older than the window's start, or the ring's first record
    /// ever (it never filled): nothing of the window was overwritten.
    pub(crate) reached_start: bool,
    /// Events the kernel reported lost (while paused) among the window's records.
    pub(crate) lost: u64,
    /// Samples in the window this decoder could not read (none, unless a record was torn).
    pub(crate) undecoded: u64,
}

fn attr_for(id: u16) -> sys::perf_event_attr {
    let mut attr = sys::perf_event_attr::default();
    attr.type_ = sys::PERF_TYPE_TRACEPOINT;
    attr.size = std::mem::size_of::<sys::perf_event_attr>() as u32;
    attr.config = u64::from(id);
    // RAW carries the task ids and each ring is one CPU's: nothing else is needed (see
    // perf.rs), and every byte less is more time in the ring.
    attr.sample_type = u64::from(sys::PERF_SAMPLE_RAW | sys::PERF_SAMPLE_TIME);
    attr.clockid = libc::CLOCK_MONOTONIC;
    attr.__bindgen_anon_1.sample_period = 1;
    attr.set_disabled(1);
    attr.set_use_clockid(1);
    attr.set_write_backward(1);
    // Nobody waits on the ring: a byte watermark (0: half the ring) keeps the kernel from
    // queueing a wake-up for every event.
    attr.set_watermark(1);
    attr
}

fn open_event(id: u16, cpu: usize) -> io::Result<OwnedFd> {
    let mut attr = attr_for(id);
    // SAFETY: `attr` is a fully initialised perf_event_attr of the size it declares; it asks
    // for a tracepoint on one CPU of any task, which only reads.
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(
            &mut attr,
            -1,
            cpu as libc::c_int,
            -1,
            libc::c_ulong::from(sys::PERF_FLAG_FD_CLOEXEC),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by perf_event_open and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).unwrap_or(4096).max(4096)
}

/// Opens every event of `formats` on `cpu`, all writing backward into one read-only ring of
/// `ring_bytes` (rounded up to a power of two pages).
pub(crate) fn open_backward(
    cpu: usize,
    formats: &[(EventSpec, EventFormat)],
    ring_bytes: usize,
    proc_root: &Path,
) -> Result<BackwardRing, TraceUnavailable> {
    let mut iter = formats.iter();
    let (first_spec, first) = iter.next().ok_or_else(|| TraceUnavailable::MissingEvent {
        event: "sched:sched_switch".into(),
        reason: "no events to trace".into(),
    })?;
    let leader = open_event(first.id, cpu).map_err(|e| refused(first_spec, cpu, &e, proc_root))?;
    let page = page_size();
    let data_size = ring_bytes.div_ceil(page).next_power_of_two() * page;
    let map_len = page + data_size;
    // SAFETY: a fresh shared mapping of a perf event's ring; PROT_READ alone is what puts the
    // ring in overwrite mode (the kernel then never waits for a reader's tail).
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            map_len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            leader.as_raw_fd(),
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(refused(
            first_spec,
            cpu,
            &io::Error::last_os_error(),
            proc_root,
        ));
    }
    let mut ring = BackwardRing {
        cpu,
        leader,
        redirected: Vec::new(),
        base: base.cast(),
        map_len,
        data_offset: page,
        data_size,
        scratch: Vec::new(),
    };
    // Kernels since 4.1 say where the data is; older ones put it right after the first page.
    let (offset, size) = (ring.meta_u64(DATA_OFFSET), ring.meta_u64(DATA_SIZE));
    if offset != 0 && size != 0 {
        ring.data_offset = offset as usize;
        ring.data_size = size as usize;
    }
    for (spec, format) in iter {
        let fd = open_event(format.id, cpu).map_err(|e| refused(spec, cpu, &e, proc_root))?;
        // SAFETY: both descriptors are open perf events owned here, both backward; SET_OUTPUT
        // only redirects the second one's records into the first one's ring.
        let rc = unsafe {
            perf_event_open_sys::ioctls::SET_OUTPUT(fd.as_raw_fd(), ring.leader.as_raw_fd())
        };
        if rc != 0 {
            return Err(refused(spec, cpu, &io::Error::last_os_error(), proc_root));
        }
        ring.redirected.push(fd);
    }
    Ok(ring)
}

/// Offsets in `struct perf_event_mmap_page` (fixed by the kernel's ABI).
const DATA_HEAD: usize = std::mem::offset_of!(sys::perf_event_mmap_page, data_head);
const DATA_OFFSET: usize = std::mem::offset_of!(sys::perf_event_mmap_page, data_offset);
const DATA_SIZE: usize = std::mem::offset_of!(sys::perf_event_mmap_page, data_size);

impl BackwardRing {
    fn meta_u64(&self, offset: usize) -> u64 {
        // SAFETY: `offset` is a field of the metadata page, 8-aligned, inside the mapping; the
        // kernel updates it concurrently, hence the volatile read.
        unsafe { std::ptr::read_volatile(self.base.add(offset).cast::<u64>()) }
    }

    fn ioctl_all(&self, enable: bool) -> io::Result<()> {
        for fd in std::iter::once(&self.leader).chain(&self.redirected) {
            // SAFETY: `fd` is an open perf event owned by this ring.
            let rc = unsafe {
                if enable {
                    perf_event_open_sys::ioctls::ENABLE(fd.as_raw_fd(), 0)
                } else {
                    perf_event_open_sys::ioctls::DISABLE(fd.as_raw_fd(), 0)
                }
            };
            if rc != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }

    /// Starts all events of this ring.
    pub(crate) fn enable(&mut self) -> io::Result<()> {
        self.ioctl_all(true)
    }

    /// Stops all events of this ring.
    pub(crate) fn disable(&mut self) {
        let _ = self.ioctl_all(false);
    }

    fn pause(&self, paused: bool) -> io::Result<()> {
        // SAFETY: the leader is an open perf event with a ring; pausing it pauses the ring that
        // every redirected event writes into.
        let rc = unsafe {
            perf_event_open_sys::ioctls::PAUSE_OUTPUT(self.leader.as_raw_fd(), u32::from(paused))
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Copies `len` bytes of the ring from `pos` (a ring position: taken modulo its size).
    fn copy(&self, pos: u64, out: &mut [u8]) {
        let mask = self.data_size - 1;
        let start = (pos as usize) & mask;
        let first = out.len().min(self.data_size - start);
        // SAFETY: both ranges lie inside the data area of the live mapping (`start + first` ≤
        // data_size, and the rest, if any, from its beginning); `out` is a distinct buffer.
        unsafe {
            let data = self.base.add(self.data_offset);
            std::ptr::copy_nonoverlapping(data.add(start), out.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(data, out.as_mut_ptr().add(first), out.len() - first);
        }
    }

    /// Appends the events stamped in `[t0, t1]` to `out`, in time order: pauses the ring,
    /// walks back from its newest record until one older than `t0` (only those in the window
    /// are decoded), and resumes it. `ever_before_t0` says the ring was enabled before `t0`,
    /// so a ring that never filled holds everything since.
    pub(crate) fn window(
        &mut self,
        decoder: &mut Decoder,
        t0: u64,
        t1: u64,
        ever_before_t0: bool,
        out: &mut Vec<TraceEvent>,
    ) -> Walk {
        let mut walk = Walk::default();
        if self.pause(true).is_err() {
            return walk;
        }
        let head = self.meta_u64(DATA_HEAD);
        fence(Ordering::Acquire);
        let size = self.data_size as u64;
        let cpu = self.cpu as u16;
        let from = out.len();
        // Newest first. A lost-records marker has no time of its own: it is stamped, as the
        // streaming reader does, with the time of the record before it (the next one walked).
        let mut pos = head;
        let mut pending_lost = 0u64;
        let mut header = [0u8; HEADER];
        let mut stamp = [0u8; 8];
        loop {
            let walked = pos.wrapping_sub(head);
            if walked + HEADER as u64 > size {
                break;
            }
            self.copy(pos, &mut header);
            let kind = u32::from_ne_bytes(header[0..4].try_into().expect("4 bytes"));
            let len = u64::from(u16::from_ne_bytes(
                header[6..8].try_into().expect("2 bytes"),
            ));
            if len == 0 {
                // Never-written (zeroed) memory: the ring never filled, so this is the first
                // record ever written; everything since the enable is here.
                walk.reached_start = ever_before_t0;
                break;
            }
            if len < HEADER as u64 || walked + len > size {
                // The oldest record's tail was overwritten by the newest ones: the walk ends at
                // the last whole record.
                break;
            }
            match kind {
                sys::PERF_RECORD_SAMPLE if len >= (HEADER + 12) as u64 => {
                    self.copy(pos + HEADER as u64, &mut stamp);
                    let ts = u64::from_ne_bytes(stamp);
                    if pending_lost > 0 && ts <= t1 {
                        // The gap runs from this record to a newer one: it overlaps the window.
                        walk.lost += pending_lost;
                        out.push(TraceEvent {
                            ts_ns: ts.max(t0),
                            cpu,
                            kind: EventKind::Lost {
                                count: pending_lost,
                            },
                        });
                    }
                    pending_lost = 0;
                    if ts < t0 {
                        walk.reached_start = true;
                        break;
                    }
                    if ts <= t1 {
                        let mut record = std::mem::take(&mut self.scratch);
                        record.resize(len as usize, 0);
                        self.copy(pos, &mut record);
                        let raw_len =
                            u32::from_ne_bytes(record[16..20].try_into().expect("4 bytes"))
                                as usize;
                        match record.get(20..20 + raw_len) {
                            Some(raw) => match decoder.decode(raw, ts, cpu) {
                                Some(ev) => out.push(ev),
                                None => walk.undecoded += 1,
                            },
                            None => walk.undecoded += 1,
                        }
                        self.scratch = record;
                    }
                }
                sys::PERF_RECORD_LOST if len >= (HEADER + 16) as u64 => {
                    let mut count = [0u8; 8];
                    self.copy(pos + HEADER as u64 + 8, &mut count);
                    pending_lost += u64::from_ne_bytes(count);
                }
                // Throttling and other records carry nothing a card uses.
                _ => {}
            }
            pos = pos.wrapping_add(len);
        }
        if pending_lost > 0 {
            // Lost before the oldest record kept: the window cannot say what is missing.
            walk.lost += pending_lost;
            walk.reached_start = false;
        }
        // A record a writer had begun before the pause may have landed since, over the oldest
        // bytes walked: the window is then not vouched for (perf's own reader does not look).
        let head_now = self.meta_u64(DATA_HEAD);
        let _ = self.pause(false);
        if head_now != head {
            walk.reached_start = false;
        }
        out[from..].reverse();
        walk
    }
}

impl Drop for BackwardRing {
    fn drop(&mut self) {
        // SAFETY: `base` and `map_len` are the mapping made in `open_backward`, unmapped once.
        unsafe { libc::munmap(self.base.cast(), self.map_len) };
    }
}
