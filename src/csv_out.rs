//! Streams one CSV row per buffer to a file as buffers are drained, so a run that ends early keeps every row; runs on the main thread.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use xrunlab_engine::BufferReport;

pub struct CsvOut {
    out: BufWriter<File>,
    threads: usize,
    path: String,
}

impl CsvOut {
    /// Creates the file and writes the header; `threads` audio threads get columns (driver first).
    pub fn create(path: &Path, threads: usize) -> Result<CsvOut, String> {
        let file =
            File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        let mut out = BufWriter::new(file);
        let mut header = String::from(
            "epoch,seq,frames,sample_rate,period_start_ns,deadline_ns,driver_wake_ns,render_start_ns,render_end_ns,\
             load_pct,active_sines,burst,late,device_xrun,dropout,input_peak,server_load_pct",
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
        writeln!(out, "{header}").map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(CsvOut {
            out,
            threads,
            path: path.display().to_string(),
        })
    }

    /// Appends one buffer. Missing thread records leave empty cells.
    pub fn row(&mut self, b: &BufferReport) -> Result<(), String> {
        let mut line = format!(
            "{},{},{},{},{},{},{},{},{},{:.3},{},{},{},{},{},{},{}",
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
        writeln!(self.out, "{line}").map_err(|e| format!("cannot write {}: {e}", self.path))
    }

    /// Flushes what is buffered to the file.
    pub fn flush(&mut self) -> Result<(), String> {
        self.out
            .flush()
            .map_err(|e| format!("cannot write {}: {e}", self.path))
    }
}
