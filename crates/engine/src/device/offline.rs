//! The offline device: renders as fast as possible into a 32-bit float stereo WAV file; its own
//! (non-real-time) render thread is the driver thread.
//!
//! The samples go to `FILE.PID.partial` beside the target, whose header is
//! brought up to date every second (so a killed render leaves a readable WAV
//! of what was rendered until then), and the file is renamed to `FILE` when
//! the render ends, after an fsync: an earlier `FILE` is never destroyed by a render that dies.

use super::{Device, DeviceError, DeviceErrorKind, DeviceInfo, DeviceSignals, DeviceThread};
use crate::rt::clock::now_ns;
use crate::rt::driver::{Cycle, Renderer};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// How often the in-progress WAV's header is updated and its samples flushed.
const FLUSH_INTERVAL_NS: u64 = 1_000_000_000;

/// The in-progress file of a WAV bound for `target`.
fn partial_path(target: &Path) -> PathBuf {
    let mut name = target.as_os_str().to_owned();
    name.push(format!(".{}.partial", std::process::id()));
    PathBuf::from(name)
}

/// Renders a fixed number of frames to a WAV file, then ends.
pub struct OfflineDevice {
    sample_rate: u32,
    buffer_frames: u32,
    total_frames: u64,
    path: PathBuf,
    running: Option<DeviceThread>,
}

impl OfflineDevice {
    /// A device that writes `total_frames` frames to `path`.
    pub fn new(sample_rate: u32, buffer_frames: u32, total_frames: u64, path: PathBuf) -> Self {
        Self {
            sample_rate,
            buffer_frames,
            total_frames,
            path,
            running: None,
        }
    }
}

impl Device for OfflineDevice {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            kind: "offline".into(),
            name: format!("offline render to {}", self.path.display()),
            sample_rate: self.sample_rate,
            buffer_frames: self.buffer_frames,
            can_set_sample_rate: true,
            can_set_buffer: true,
            driver_thread: "xrunlab offline render thread (not real-time)".into(),
            driver_thread_is_ours: true,
            notes: vec![
                "renders as fast as possible: there are no deadlines, so no dropouts".into(),
            ],
        }
    }

    fn configure(
        &mut self,
        sample_rate: u32,
        buffer_frames: u32,
    ) -> Result<DeviceInfo, DeviceError> {
        self.sample_rate = sample_rate;
        self.buffer_frames = buffer_frames;
        Ok(self.info())
    }

    fn start(
        &mut self,
        mut renderer: Renderer,
        signals: Arc<DeviceSignals>,
    ) -> Result<(), DeviceError> {
        let spec = hound::WavSpec {
            channels: 2,
            sample_rate: self.sample_rate,
            bits_per_sample: 32,
            sample_format: hound::SampleFormat::Float,
        };
        let partial = partial_path(&self.path);
        let mut writer = hound::WavWriter::create(&partial, spec).map_err(|e| {
            DeviceError::caused_by(
                DeviceErrorKind::Io,
                format!("cannot create {}: {e}", partial.display()),
                e,
            )
        })?;
        let (frames, total, rate) = (
            self.buffer_frames as usize,
            self.total_frames,
            self.sample_rate,
        );
        let path = self.path.clone();
        let thread = DeviceThread::spawn("xrl-offline", move |stop_thread| {
            renderer.driver_thread_started(false);
            let mut l = vec![0.0f32; frames];
            let mut r = vec![0.0f32; frames];
            let t0 = now_ns();
            let mut last_flush = t0;
            let mut done: u64 = 0;
            let mut error = None;
            while done < total && !stop_thread.load(Ordering::Acquire) {
                let n = (total - done).min(frames as u64) as usize;
                let start = t0 + done * 1_000_000_000 / u64::from(rate.max(1));
                renderer.render(Cycle {
                    period_start_ns: start,
                    deadline_ns: u64::MAX,
                    wake_ns: now_ns(),
                    out_l: &mut l[..n],
                    out_r: &mut r[..n],
                    input: None,
                });
                for (a, b) in l[..n].iter().zip(r[..n].iter()) {
                    if let Err(e) = writer
                        .write_sample(*a)
                        .and_then(|_| writer.write_sample(*b))
                    {
                        error = Some(e.to_string());
                        break;
                    }
                }
                if error.is_some() {
                    break;
                }
                done += n as u64;
                if now_ns().saturating_sub(last_flush) >= FLUSH_INTERVAL_NS {
                    last_flush = now_ns();
                    if let Err(e) = writer.flush() {
                        error = Some(e.to_string());
                        break;
                    }
                }
            }
            let finished = writer
                .finalize()
                // hound closes the file without an fsync: the samples go to disk before the
                // rename, so that a power loss leaves the earlier WAV or the whole new one.
                .and_then(|()| {
                    std::fs::File::open(&partial)?
                        .sync_all()
                        .map_err(Into::into)
                })
                .map_err(|e| e.to_string())
                .and_then(|()| std::fs::rename(&partial, &path).map_err(|e| e.to_string()));
            match (error, finished) {
                (Some(e), _) | (None, Err(e)) => signals.fail(format!(
                    "writing {} failed: {e}; what was rendered is in {}",
                    path.display(),
                    partial.display()
                )),
                (None, Ok(())) => {
                    signals.end(format!("rendered {done} frames to {}", path.display()))
                }
            }
        })?;
        self.running = Some(thread);
        Ok(())
    }

    fn stop(&mut self) {
        self.running = None;
    }
}
