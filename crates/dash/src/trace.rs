//! `GET /api/trace`: the last seconds of the run as a Perfetto trace. The engine-owner thread
//! keeps a bounded [`History`] of drained buffers and, on request, copies the asked-for part
//! with the explain collector's dropouts and the kernel tracer's events into a
//! [`TraceSnapshot`]; a blocking task of the server's runtime turns that into the JSON
//! document, so a big trace never holds up draining or frames.
//!
//! Bounds: at most [`MAX_BUFFERS`] buffers and [`MAX_SECONDS`] seconds are kept, whichever
//! is fewer (16 384 buffers is ~44 s at 48 kHz / 128 frames, ~22 s at 64 frames); each buffer
//! costs ~200 bytes plus ~60 per audio thread, so the history stays under ~12 MB with 8
//! threads. The trace says how many seconds it really covers.

use axum::body::Bytes;
use std::collections::{HashSet, VecDeque};
use std::io::{self, Write};
use std::path::Path;
use tokio::sync::mpsc;
use xrunlab_engine::explain::counters::{CounterSample, SystemCounters, SAMPLE_EVERY_NS};
use xrunlab_engine::explain::perfetto::BufferTrace;
use xrunlab_engine::explain::trace::{PerfettoOptions, PerfettoWriter, Window};
use xrunlab_engine::explain::Dropout;
use xrunlab_engine::{BufferReport, ThreadInfo};

/// Most buffers kept for traces.
pub(crate) const MAX_BUFFERS: usize = 16_384;
/// Most seconds kept for traces, and the most a trace may ask for.
pub(crate) const MAX_SECONDS: u64 = 60;
/// The seconds a trace may ask for.
pub(crate) const SECONDS_RANGE: std::ops::RangeInclusive<u64> = 1..=MAX_SECONDS;
/// Seconds when the request does not say.
pub(crate) const DEFAULT_SECONDS: u64 = 10;

/// The recent buffers and the audio threads that rendered them, and the power and frequency
/// counters sampled once a second meanwhile.
#[derive(Debug)]
pub(crate) struct History {
    buffers: VecDeque<BufferReport>,
    /// From when on (CLOCK_MONOTONIC ns) each set of audio threads rendered, oldest first.
    threads: VecDeque<(u64, Vec<ThreadInfo>)>,
    counters: SystemCounters,
    /// Counter samples, oldest first, as far back as the buffers.
    samples: VecDeque<CounterSample>,
    next_sample_ns: u64,
}

impl Default for History {
    /// The live machine's counters, of every online CPU.
    fn default() -> History {
        let sys = xrunlab_sys::default_sys_root();
        History::with_counters(SystemCounters::live(xrunlab_sys::cpu_set(sys)))
    }
}

/// The counters of a trace's span and what the trace says about them.
pub(crate) struct CounterHistory {
    samples: Vec<CounterSample>,
    power_label: &'static str,
    notes: Vec<(&'static str, String)>,
}

impl History {
    /// An empty history sampling `counters` (fixture trees in tests).
    pub(crate) fn with_counters(counters: SystemCounters) -> History {
        History {
            buffers: VecDeque::new(),
            threads: VecDeque::new(),
            counters,
            samples: VecDeque::new(),
            next_sample_ns: 0,
        }
    }

    /// Keeps a copy of `b`, forgetting the oldest beyond the bounds; samples the counters when
    /// a second has passed since the last sample (about 60 samples are kept, a few hundred
    /// bytes each).
    pub(crate) fn push(&mut self, b: &BufferReport) {
        self.buffers.push_back(b.clone());
        let newest = b.period_start_ns;
        if newest >= self.next_sample_ns {
            self.samples.push_back(self.counters.sample(newest));
            self.next_sample_ns = newest + SAMPLE_EVERY_NS;
        }
        while self.buffers.len() > MAX_BUFFERS
            || self.buffers.front().is_some_and(|f| {
                newest.saturating_sub(f.period_start_ns) > MAX_SECONDS * 1_000_000_000
            })
        {
            self.buffers.pop_front();
        }
        // Thread sets older than the oldest buffer's are no longer needed (keep the one in use).
        let oldest = self.buffers.front().map_or(newest, |f| f.period_start_ns);
        while self.samples.front().is_some_and(|s| s.ts_ns < oldest) {
            self.samples.pop_front();
        }
        while self.threads.len() > 1 && self.threads[1].0 <= oldest {
            self.threads.pop_front();
        }
    }

    /// The period start of the newest buffer kept.
    pub(crate) fn newest_ns(&self) -> Option<u64> {
        self.buffers.back().map(|b| b.period_start_ns)
    }

    /// The audio threads from `since_ns` on (after an audio start or device switch).
    pub(crate) fn set_threads(&mut self, since_ns: u64, threads: Vec<ThreadInfo>) {
        self.threads.push_back((since_ns, threads));
        // Config changes with no buffer in between (no audio) leave sets nothing uses.
        while self.threads.len() > 1
            && self.threads[1].0 <= self.buffers.front().map_or(since_ns, |b| b.period_start_ns)
        {
            self.threads.pop_front();
        }
    }

    /// The counter samples from `from_ns` on, with the notes for the trace's metadata
    /// (`kernel_freq` as [`SystemCounters::notes`] takes it).
    pub(crate) fn counters_since(&self, from_ns: u64, kernel_freq: Option<bool>) -> CounterHistory {
        CounterHistory {
            samples: self
                .samples
                .iter()
                .filter(|s| s.ts_ns >= from_ns)
                .cloned()
                .collect(),
            power_label: self.counters.power_label(),
            notes: self.counters.notes(kernel_freq),
        }
    }

    /// The buffers whose period started at or after `from_ns`, with their thread sets.
    pub(crate) fn since(&self, from_ns: u64) -> (Vec<BufferReport>, Vec<(u64, Vec<ThreadInfo>)>) {
        let start = self
            .buffers
            .partition_point(|b| b.period_start_ns < from_ns);
        (
            self.buffers.range(start..).cloned().collect(),
            self.threads.iter().cloned().collect(),
        )
    }
}

/// What a trace is built from, copied on the engine-owner thread.
pub(crate) struct TraceSnapshot {
    /// Seconds asked for.
    pub seconds: u64,
    /// Start and end of the asked-for span, CLOCK_MONOTONIC ns.
    pub from_ns: u64,
    /// End of the span (the moment of the request).
    pub to_ns: u64,
    pub buffers: Vec<BufferReport>,
    pub threads: Vec<(u64, Vec<ThreadInfo>)>,
    /// The explain collector's dropouts in the span (`None`: "Explain dropouts" is off).
    pub dropouts: Option<Vec<Dropout>>,
    /// The kernel tracer's events in the span and the CPUs traced, or why there are none.
    pub kernel: Result<(Window, Vec<usize>), String>,
    /// Power and frequency counters of the span.
    pub counters: CounterHistory,
}

impl TraceSnapshot {
    /// The seconds the kept buffers cover: from the first one in the span to the request.
    pub(crate) fn covered_seconds(&self) -> f64 {
        self.buffers.first().map_or(0.0, |b| {
            self.to_ns
                .saturating_sub(b.period_start_ns.max(self.from_ns)) as f64
                / 1e9
        })
    }

    /// Writes the Chrome JSON trace of the snapshot to `out` as it is built; returns `out`, or
    /// the reason writing stopped (the client went away).
    pub(crate) fn write_to<W: Write>(self, out: W) -> Result<W, WriteError> {
        let covered_seconds = self.covered_seconds();
        let options = PerfettoOptions {
            max_events: None,
            every_nth_buffer: 1,
        };
        let mut writer = PerfettoWriter::to_writer(out, Path::new("GET /api/trace"), options);
        writer.other_data("xrunlab_source", "dashboard GET /api/trace".into());
        writer.other_data("xrunlab_version", env!("CARGO_PKG_VERSION").into());
        writer.other_data("xrunlab_requested_seconds", self.seconds.into());
        writer.other_data(
            "xrunlab_covered_seconds",
            ((covered_seconds * 1000.0).round() / 1000.0).into(),
        );
        writer.other_data("xrunlab_buffers", self.buffers.len().into());
        writer.other_data(
            "xrunlab_history_bound",
            format!("the last {MAX_BUFFERS} buffers or {MAX_SECONDS} s, whichever is fewer").into(),
        );
        let kernel_note = match &self.kernel {
            Ok((w, cpus)) => format!(
                "{} kernel events of CPUs {cpus:?} still in the tracer's window{}{}",
                w.events.len(),
                if w.complete {
                    ""
                } else {
                    " (the window no longer reaches back to the start of the trace)"
                },
                if w.lost_events > 0 {
                    format!("; {} lost by the kernel", w.lost_events)
                } else {
                    String::new()
                },
            ),
            Err(why) => why.clone(),
        };
        writer.other_data("xrunlab_kernel_events", kernel_note.into());
        let hint = if self.dropouts.is_some() {
            "no card: not seen while explaining, or its card is still being built"
        } else {
            "\"Explain dropouts\" was off: turn it on for the kernel's account"
        };
        let mut trace = BufferTrace::new(writer, std::process::id() as i32, hint);
        let dropouts = self.dropouts.unwrap_or_default();
        let explained: HashSet<(u64, u64)> = dropouts
            .iter()
            .map(|d| (d.period_start_ns, d.seq))
            .collect();
        let mut sets = self.threads.iter().peekable();
        let mut current: Option<&Vec<ThreadInfo>> = None;
        for b in &self.buffers {
            while let Some((since, threads)) = sets.peek() {
                if *since > b.period_start_ns && current.is_some() {
                    break;
                }
                trace.set_threads(threads);
                current = Some(threads);
                sets.next();
            }
            trace.buffer(b, explained.contains(&(b.period_start_ns, b.seq)));
        }
        for d in &dropouts {
            trace.dropout(d);
        }
        if let Ok((window, cpus)) = &self.kernel {
            trace.kernel(&window.events, cpus);
        }
        for s in &self.counters.samples {
            trace.system_counters(s, self.counters.power_label);
        }
        trace.counter_notes(self.counters.notes);
        let (summary, out) = trace.into_writer().finish_into();
        match (out, summary.warning) {
            (Some(out), None) => Ok(out),
            (_, warning) => Err(WriteError::Stopped(
                warning.unwrap_or_else(|| "the trace writer stopped".into()),
            )),
        }
    }
}

/// Why a trace download ended before its end.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WriteError {
    /// The trace writer stopped; its own account (the client went away, most often).
    #[error("{0}")]
    Stopped(String),
    /// The last chunk could not be handed to the connection.
    #[error("the trace's last chunk could not be sent: {0}")]
    Flush(#[source] std::io::Error),
}

/// Kernel send buffer asked for on a connection that downloads a trace (the kernel caps it at
/// `net.core.wmem_max`): the dashboard's connections keep a small one so a stalled page cannot
/// queue stale telemetry, but a multi-megabyte trace through 32 kB at a time waits on a
/// scheduler round trip per 32 kB, which on a busy machine made a 10 s trace take seconds.
pub(crate) const TRACE_SEND_BUFFER_BYTES: i32 = 4 << 20;

/// The socket of the connection a request came in on (recorded at accept, see `lib.rs`), so
/// the trace download can widen its send buffer, and the client's address, which the token
/// check's slowdown counts by.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnSocket(std::os::fd::RawFd, std::net::IpAddr);

impl
    axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, tokio::net::TcpListener>>
    for ConnSocket
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, tokio::net::TcpListener>) -> Self {
        use std::os::fd::AsRawFd;
        ConnSocket(stream.io().as_raw_fd(), stream.remote_addr().ip())
    }
}

impl ConnSocket {
    /// The client's address.
    pub(crate) fn peer(self) -> std::net::IpAddr {
        self.1
    }

    /// Raises this connection's send buffer for a trace download; returns the size the kernel
    /// granted (it doubles the request for its bookkeeping), or the error.
    ///
    /// Call only from the handler of a request that came in on this connection: the server
    /// owns the socket until the response is written and polls the handler only while the
    /// connection is open, so the descriptor is this connection's for the whole call.
    pub(crate) fn widen_send_buffer(self, bytes: i32) -> io::Result<i32> {
        let value: libc::c_int = bytes;
        // SAFETY: the descriptor is this request's open TCP socket (see above); `value` is a
        // c_int that lives across the call and its size is passed.
        let rc = unsafe {
            libc::setsockopt(
                self.0,
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        let mut granted: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: as above; `granted` and `len` are live, writable and of the sizes passed.
        let rc = unsafe {
            libc::getsockopt(
                self.0,
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                (&mut granted as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(granted)
    }
}

/// Bytes handed from the blocking task that writes a trace to the response body, in chunks of
/// about this size: big enough that the body's stream costs nothing per event, small enough
/// that the first bytes leave while the rest is being built.
const CHUNK_BYTES: usize = 256 * 1024;

/// A `Write` on the blocking task that sends the response body to the server in chunks
/// (`blocking_send` waits while the client is slower than the builder: at most a few chunks are
/// ever queued). Fails once the response is gone (the client went away).
pub(crate) struct ChunkWriter {
    tx: mpsc::Sender<Result<Bytes, io::Error>>,
    buf: Vec<u8>,
}

impl ChunkWriter {
    pub(crate) fn new(tx: mpsc::Sender<Result<Bytes, io::Error>>) -> ChunkWriter {
        ChunkWriter {
            tx,
            buf: Vec::with_capacity(CHUNK_BYTES),
        }
    }

    fn send(&mut self) -> io::Result<()> {
        let chunk = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK_BYTES));
        self.tx
            .blocking_send(Ok(Bytes::from(chunk)))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the client went away"))
    }
}

impl Write for ChunkWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK_BYTES {
            self.send()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            self.send()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer(seq: u64, period_start_ns: u64) -> BufferReport {
        BufferReport {
            record: xrunlab_engine::BufferRecord {
                seq,
                frames: 128,
                period_start_ns,
                deadline_ns: period_start_ns + 2_666_666,
                driver_wake_ns: period_start_ns,
                render_start_ns: period_start_ns,
                render_end_ns: period_start_ns + 1_000_000,
                active_sines: 10,
                ..Default::default()
            },
            sample_rate: 48_000,
            ..BufferReport::default()
        }
    }

    #[test]
    fn counters_are_sampled_once_a_second_and_kept_as_far_back_as_the_buffers() {
        // A fixture root with nothing in it: no RAPL, no cpufreq, no stat.
        let none = std::env::temp_dir().join("xrunlab-dash-no-such-root");
        let counters = SystemCounters::new(&none, &none, vec![0, 1]);
        let mut h = History::with_counters(counters);
        let second = 1_000_000_000;
        for seq in 0..50 {
            h.push(&buffer(seq, seq * second / 10));
        }
        let all = h.counters_since(0, None);
        assert_eq!(
            all.samples.iter().map(|s| s.ts_ns).collect::<Vec<_>>(),
            [0, second, 2 * second, 3 * second, 4 * second],
            "one sample per second of buffers"
        );
        assert!(all
            .samples
            .iter()
            .all(|s| s.power_w.is_none() && s.freqs_khz.is_empty()));
        assert_eq!(h.counters_since(2 * second + 1, None).samples.len(), 2);
        let notes = all.notes;
        assert_eq!(notes[0].0, "xrunlab_power");
        assert!(
            notes[1].1.starts_with("no cpufreq frequency for CPUs 0-1"),
            "{notes:?}"
        );
        // 100 s more: the samples go with the buffers they belong to.
        for seq in 50..1050 {
            h.push(&buffer(seq, seq * second / 10));
        }
        let kept = h.counters_since(0, None).samples;
        assert!(
            (60..=61).contains(&kept.len()),
            "{} samples kept",
            kept.len()
        );
        let (buffers, _) = h.since(0);
        assert!(kept[0].ts_ns >= buffers[0].period_start_ns);
    }

    #[test]
    fn a_trace_download_widens_its_connections_send_buffer() {
        use std::os::fd::AsRawFd;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let _client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let conn = ConnSocket(server.as_raw_fd(), std::net::IpAddr::from([127, 0, 0, 1]));
        // What the dashboard's connections start with (doubled by the kernel).
        let small = conn.widen_send_buffer(32 * 1024).unwrap();
        let wide = conn.widen_send_buffer(TRACE_SEND_BUFFER_BYTES).unwrap();
        // The kernel caps the size at net.core.wmem_max (at least 200 kB on common kernels).
        assert!(
            wide >= 4 * small,
            "send buffer {small} -> {wide} bytes after asking for {TRACE_SEND_BUFFER_BYTES}"
        );
    }

    #[test]
    fn the_history_keeps_at_most_max_buffers() {
        let mut h = History::default();
        for seq in 0..(MAX_BUFFERS as u64 + 100) {
            h.push(&buffer(seq, seq * 1_000));
        }
        let (kept, _) = h.since(0);
        assert_eq!(kept.len(), MAX_BUFFERS);
        assert_eq!(kept[0].seq, 100, "the oldest are forgotten");
    }

    #[test]
    fn the_history_keeps_at_most_max_seconds_and_since_cuts_the_span() {
        let mut h = History::default();
        let second = 1_000_000_000;
        for seq in 0..100 {
            // One buffer a second: 100 s, of which the last 60 (and the one at exactly 60 s) stay.
            h.push(&buffer(seq, seq * second));
        }
        let (kept, _) = h.since(0);
        assert_eq!(kept.first().map(|b| b.seq), Some(39));
        assert_eq!(kept.len(), 61);
        let (last, _) = h.since(95 * second);
        assert_eq!(
            last.iter().map(|b| b.seq).collect::<Vec<_>>(),
            [95, 96, 97, 98, 99]
        );
    }
}
