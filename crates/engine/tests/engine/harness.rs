//! Helpers shared by the engine tests: start an engine on the simulated device and collect its
//! buffers; runs on the test threads.

use std::time::{Duration, Instant};
use xrunlab_engine::device::sim::SimDevice;
use xrunlab_engine::{BufferReport, Engine, EngineConfig};

pub fn config(sines: usize, threads: usize, buffer: u32) -> EngineConfig {
    EngineConfig {
        sines,
        threads,
        buffer_frames: buffer,
        ..EngineConfig::default()
    }
}

pub fn start(c: EngineConfig) -> Engine {
    let device = SimDevice::new(c.sample_rate, c.buffer_frames, c.input);
    Engine::start(c, Box::new(device)).expect("engine starts on the simulated device")
}

/// Drains for `d`, returning every buffer seen.
pub fn collect(engine: &mut Engine, d: Duration) -> Vec<BufferReport> {
    let mut out = Vec::new();
    let t0 = Instant::now();
    while t0.elapsed() < d {
        std::thread::sleep(Duration::from_millis(10));
        engine.drain(|b| out.push(b.clone()));
    }
    out
}
