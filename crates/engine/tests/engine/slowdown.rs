//! The kernel slowdown test hook (`EngineConfig::kernel_slowdown`): a slowed kernel costs about K
//! times the render time of a normal one at the same sines, and renders the same audio; runs on the
//! test threads.

use crate::harness::{collect, config, start};
use std::time::Duration;
use xrunlab_engine::device::offline::OfflineDevice;
use xrunlab_engine::{BufferReport, Engine, EngineConfig};

fn median(v: Vec<f64>) -> f64 {
    xrunlab_stats::median_interpolated(&v).expect("buffers to take a median of")
}

/// One thread (the driver renders everything) at 300 sines and 256 frames, with `slowdown`.
fn slowed(slowdown: u32) -> EngineConfig {
    let mut c = config(300, 1, 256);
    c.kernel_slowdown = slowdown;
    c
}

/// Per-buffer load (render time / buffer duration) and render-thread CPU time of a
/// 1 s run, after 200 ms of settling.
fn measure(slowdown: u32) -> (Vec<f64>, Vec<f64>) {
    let mut engine = start(slowed(slowdown));
    collect(&mut engine, Duration::from_millis(200));
    let seen: Vec<BufferReport> = collect(&mut engine, Duration::from_secs(1));
    engine.stop(|_| {});
    assert!(
        seen.len() > 50,
        "K={slowdown}: only {} buffers rendered",
        seen.len()
    );
    assert!(
        seen.iter().all(|b| b.active_sines == 300),
        "K={slowdown}: the same sines sound"
    );
    let load = seen.iter().map(BufferReport::load).collect();
    let cpu = seen
        .iter()
        .map(|b| b.threads.iter().map(|t| t.cpu_ns as f64).sum())
        .collect();
    (load, cpu)
}

#[test]
fn a_kernel_slowed_3x_takes_about_3x_the_render_time_at_the_same_sines() {
    // Interleaved, so a burst of noise from the shared machine hits both settings;
    // medians, so a preempted buffer does not count.
    let (mut load1, mut load3, mut cpu1, mut cpu3) = (vec![], vec![], vec![], vec![]);
    for _ in 0..2 {
        let (l, c) = measure(1);
        load1.extend(l);
        cpu1.extend(c);
        let (l, c) = measure(3);
        load3.extend(l);
        cpu3.extend(c);
    }
    let (l1, l3) = (median(load1), median(load3));
    let (c1, c3) = (median(cpu1), median(cpu3));
    let (load_ratio, cpu_ratio) = (l3 / l1, c3 / c1);
    eprintln!(
        "median load K=1 {:.2} %, K=3 {:.2} % (ratio {load_ratio:.2}); median render CPU K=1 {:.0} µs, K=3 {:.0} µs (ratio {cpu_ratio:.2})",
        l1 * 100.0,
        l3 * 100.0,
        c1 / 1e3,
        c3 / 1e3
    );
    // Three kernel passes per chunk instead of one; the mix, the wake-up and the
    // bookkeeping are not repeated, so a little under 3 on a quiet machine.
    assert!(
        (2.0..=4.5).contains(&load_ratio),
        "load ratio K=3/K=1 {load_ratio:.2} (medians {:.2} % / {:.2} %)",
        l3 * 100.0,
        l1 * 100.0
    );
    assert!(
        (2.0..=4.5).contains(&cpu_ratio),
        "render CPU ratio K=3/K=1 {cpu_ratio:.2}"
    );
}

/// Renders 0.5 s offline with one thread and `slowdown`; returns the samples.
fn render_offline(slowdown: u32) -> Vec<f32> {
    let path = std::env::temp_dir().join(format!(
        "xrunlab-slowdown-{slowdown}-{}.wav",
        std::process::id()
    ));
    let mut c = slowed(slowdown);
    c.rt.priority = None;
    let device = OfflineDevice::new(48_000, 256, 24_000, path.clone());
    let mut engine = Engine::start(c, Box::new(device)).unwrap();
    for _ in 0..1000 {
        engine.drain(|_| {});
        if engine.device_ended().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let reason = engine.device_ended().expect("offline render finishes");
    engine.stop(|_| {});
    assert!(reason.contains("24000 frames"), "{reason}");
    let samples = hound::WavReader::open(&path)
        .unwrap()
        .samples::<f32>()
        .map(Result::unwrap)
        .collect();
    let _ = std::fs::remove_file(path);
    samples
}

#[test]
fn a_slowed_kernel_renders_exactly_the_same_audio() {
    // The extra passes start from copies of the phases and amplitudes and write to
    // scratch: the partials advance once per buffer and the mix sees one pass.
    let normal = render_offline(1);
    let slow = render_offline(3);
    assert_eq!(normal.len(), 48_000, "0.5 s of stereo");
    assert!(
        normal.iter().any(|s| s.abs() > 1e-3),
        "the chord is audible, so the comparison means something"
    );
    let differing = normal.iter().zip(&slow).filter(|(a, b)| a != b).count();
    assert_eq!(
        (slow.len(), differing),
        (normal.len(), 0),
        "the slowed render's samples equal the normal one's"
    );
}

#[test]
fn the_slowdown_is_validated_with_its_range() {
    for bad in [0, 17] {
        let c = EngineConfig {
            kernel_slowdown: bad,
            ..EngineConfig::default()
        };
        let e = c.validate().unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.allowed.as_str()),
            ("kernel_slowdown", "1..=16")
        );
    }
}
