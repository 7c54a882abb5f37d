//! Streams one CSV row per buffer as buffers are drained, into an in-progress file beside the
//! target that is flushed every second and renamed to the target when the run ends; runs on the
//! main thread.
//!
//! Why not write the target directly: a run killed with SIGKILL must neither
//! destroy the previous file at that path nor lose what it measured. The rows
//! go to `FILE.PID.partial` (PID: this process), which survives `kill -9` with
//! every row up to about a second old, and `FILE` is replaced only when the
//! run ends, by results' [`PartialFile`] commit (fsync, rename, fsync of the directory).

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};
use xrunlab_engine::BufferReport;
use xrunlab_results::write::PartialFile;

/// Rows reach the file at least this often, so a killed run loses at most this much.
const FLUSH_INTERVAL: Duration = Duration::from_secs(1);

pub struct CsvOut {
    out: PartialFile,
    threads: usize,
    last_flush: Instant,
}

impl CsvOut {
    /// Creates the in-progress file beside `target` and writes the header;
    /// `threads` audio threads get columns (driver first). `target` is not touched.
    pub fn create(target: &Path, threads: usize) -> Result<CsvOut, String> {
        let mut out = PartialFile::create(target).map_err(|e| e.to_string())?;
        let mut header = String::from(
            "epoch,seq,frames,sample_rate,period_start_ns,deadline_ns,driver_wake_ns,render_start_ns,render_end_ns,\
             load_pct,active_sines,burst,late,device_xrun,dropout,input_peak,server_load_pct,\
             server_xruns,incomplete,unfinished_threads",
        );
        for i in 0..threads {
            for col in [
                "cpu_start",
                "cpu_end",
                "sines",
                "computed",
                "chunks",
                "wake_us",
                "busy_us",
                "cpu_us",
            ] {
                header.push_str(&format!(",t{i}_{col}"));
            }
        }
        writeln!(out, "{header}")
            .map_err(|e| format!("cannot write {}: {e}", out.partial().display()))?;
        Ok(CsvOut {
            out,
            threads,
            last_flush: Instant::now(),
        })
    }

    /// The in-progress file.
    pub fn partial(&self) -> &Path {
        self.out.partial()
    }

    fn write_error(&self, e: std::io::Error) -> String {
        format!(
            "cannot write {}: {e}; the rows written until then stay in {}",
            self.out.target().display(),
            self.out.partial().display()
        )
    }

    /// Appends one buffer. Missing thread records leave empty cells.
    pub fn row(&mut self, b: &BufferReport) -> Result<(), String> {
        let unfinished: Vec<String> = b.unfinished_threads().map(|t| t.to_string()).collect();
        let mut line = format!(
            "{},{},{},{},{},{},{},{},{},{:.3},{},{},{},{},{},{},{},{},{},{}",
            b.epoch,
            b.seq,
            b.frames,
            b.sample_rate,
            b.period_start_ns,
            b.deadline_ns,
            b.driver_wake_ns,
            b.render_start_ns,
            b.render_end_ns,
            b.load() * 100.0,
            b.active_sines,
            u8::from(b.burst),
            u8::from(b.late),
            u8::from(b.device_xrun),
            u8::from(b.dropout()),
            b.input_peak.map(|p| format!("{p:.6}")).unwrap_or_default(),
            b.server_load_pct
                .map(|p| format!("{p:.2}"))
                .unwrap_or_default(),
            b.server_xruns,
            u8::from(b.incomplete()),
            // Thread indexes separated by ';', so the field needs no quoting.
            unfinished.join(";"),
        );
        for i in 0..self.threads {
            match b.threads.iter().find(|t| t.index == i) {
                Some(t) => line.push_str(&format!(
                    ",{},{},{},{},{},{:.3},{:.3},{:.3}",
                    t.cpu_start,
                    t.cpu_end,
                    t.sines,
                    t.computed,
                    t.chunks,
                    t.wake_latency_ns as f64 / 1e3,
                    t.busy_ns as f64 / 1e3,
                    t.cpu_ns as f64 / 1e3
                )),
                None => line.push_str(",,,,,,,,"),
            }
        }
        line.push('\n');
        // One write per whole line: BufWriter never splits a write across its
        // flushes, so a killed run's file ends with a complete row.
        self.out
            .write_all(line.as_bytes())
            .map_err(|e| self.write_error(e))
    }

    /// Flushes the buffered rows to the file when the last flush is a second old.
    pub fn flush_if_due(&mut self) -> Result<(), String> {
        if self.last_flush.elapsed() < FLUSH_INTERVAL {
            return Ok(());
        }
        self.last_flush = Instant::now();
        self.out.flush().map_err(|e| self.write_error(e))
    }

    /// Flushes every row and commits the in-progress file over the target (fsynced); on an
    /// error the rows stay in the in-progress file, which the error names.
    pub fn finish(self) -> Result<(), String> {
        self.out.commit().map_err(|e| e.to_string())
    }
}

/// An optional CSV that a run goes on without once a write fails: the rows written until
/// then stay in its in-progress file, and the error is kept to be reported at the end.
pub struct CsvRows {
    out: Option<CsvOut>,
    error: Option<String>,
}

impl CsvRows {
    /// Rows into `out`, or nowhere.
    pub fn new(out: Option<CsvOut>) -> CsvRows {
        CsvRows { out, error: None }
    }

    /// Appends one buffer (see [`CsvOut::row`]).
    pub fn row(&mut self, b: &BufferReport) {
        let result = self.out.as_mut().map_or(Ok(()), |out| out.row(b));
        self.keep(result);
    }

    /// Flushes when due (see [`CsvOut::flush_if_due`]).
    pub fn flush_if_due(&mut self) {
        let result = self.out.as_mut().map_or(Ok(()), CsvOut::flush_if_due);
        self.keep(result);
    }

    /// The in-progress file, while rows go to it.
    pub fn partial(&self) -> Option<&Path> {
        self.out.as_ref().map(CsvOut::partial)
    }

    /// Renames the in-progress file into place; returns the errors of the finish and of
    /// the write that stopped the rows earlier, in that order.
    pub fn finish(self) -> Vec<String> {
        let finished = self.out.map_or(Ok(()), CsvOut::finish);
        finished.err().into_iter().chain(self.error).collect()
    }

    fn keep(&mut self, result: Result<(), String>) {
        if let Err(e) = result {
            self.error.get_or_insert(e);
            self.out = None;
        }
    }
}
