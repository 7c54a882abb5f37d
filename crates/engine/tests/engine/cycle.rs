//! The render cycle's observable behaviour: dropout detection and catch-up, work distribution,
//! driver modes, live changes and restarts, offline rendering.

use crate::harness::{collect, config, start};
use std::time::Duration;
use xrunlab_engine::device::offline::OfflineDevice;
use xrunlab_engine::{DriverMode, Engine};

#[test]
fn injected_stalls_give_exactly_one_dropout_each() {
    // 512 frames = 10.67 ms per period. A 16 ms stall makes its buffer late at
    // ~150 % load; a loaded machine may add late renders of its own, which are
    // allowed but told apart by their load.
    let mut engine = start(config(0, 2, 512));
    let mut seen = collect(&mut engine, Duration::from_millis(200));
    for _ in 0..3 {
        engine.inject_stall(16_000_000);
        seen.extend(collect(&mut engine, Duration::from_millis(150)));
    }
    let skipped = engine.signals().skipped_periods();
    engine.stop(|b| seen.push(b.clone()));
    let late: Vec<_> = seen.iter().filter(|b| b.late).collect();
    // A 16 ms stall in a 10.67 ms buffer shows as ~150 % load.
    let stalled: Vec<_> = late.iter().filter(|b| b.load() > 1.4).collect();
    assert_eq!(
        stalled.len(),
        3,
        "one late render per stall; late renders (seq, load): {:?}",
        late.iter().map(|b| (b.seq, b.load())).collect::<Vec<_>>()
    );
    assert!(stalled.iter().all(|b| b.dropout()));
    // The record says which buffers the stall was injected into, and how long it was.
    let injected: Vec<u64> = seen
        .iter()
        .filter(|b| b.injected_stall_ns > 0)
        .map(|b| b.seq)
        .collect();
    assert_eq!(
        injected,
        stalled.iter().map(|b| b.seq).collect::<Vec<_>>(),
        "the stalled buffers carry the injected stall"
    );
    assert!(stalled.iter().all(|b| b.injected_stall_ns == 16_000_000));
    // Each stall ends 5.3 ms past its deadline, before the next boundary: one
    // period skipped per stall (a late render of the machine's own may add more).
    assert!(
        skipped >= 3,
        "skipped periods: {skipped} for {} late renders",
        late.len()
    );
    // Sequence numbers stay contiguous: skipped periods are not rendered.
    assert!(seen.windows(2).all(|w| w[1].seq == w[0].seq + 1));
}

#[test]
fn work_shares_add_up_to_the_active_sines_in_both_driver_modes() {
    for mode in [DriverMode::ProcessesSines, DriverMode::WaitsForWorkers] {
        let mut c = config(1000, 3, 256);
        c.driver_mode = mode;
        c.chunk_size = 64;
        let mut engine = start(c.clone());
        let seen = collect(&mut engine, Duration::from_millis(600));
        let threads = engine.threads();
        engine.stop(|_| {});
        assert_eq!(
            threads.len(),
            c.realtime_threads(),
            "{mode:?}: one report per audio thread"
        );
        let complete: Vec<_> = seen
            .iter()
            .filter(|b| b.threads.len() == c.realtime_threads())
            .collect();
        assert!(
            complete.len() > 50,
            "{mode:?}: {} complete buffers",
            complete.len()
        );
        for b in &complete {
            let sum: u32 = b.threads.iter().map(|t| t.sines).sum();
            assert_eq!(
                sum, b.active_sines,
                "{mode:?}: shares of buffer {} add up",
                b.seq
            );
            let chunks: u32 = b.threads.iter().map(|t| t.chunks).sum();
            assert_eq!(
                chunks,
                1000u32.div_ceil(64),
                "{mode:?}: every chunk claimed once"
            );
        }
        let driver_sines: u32 = complete.iter().map(|b| b.threads[0].sines).sum();
        match mode {
            DriverMode::WaitsForWorkers => {
                assert_eq!(driver_sines, 0, "a waiting driver computes nothing")
            }
            DriverMode::ProcessesSines => {
                assert!(driver_sines > 0, "a processing driver takes chunks")
            }
        }
    }
}

#[test]
fn live_changes_apply_without_restart_and_structural_ones_restart() {
    let mut c = config(100, 2, 128);
    let mut engine = start(c.clone());
    let mut seen = collect(&mut engine, Duration::from_millis(200));
    c.sines = 700;
    c.min_load_pct = 30.0;
    c.busy.count = 2;
    let applied = engine.apply(c.clone(), |b| seen.push(b.clone())).unwrap();
    assert!(!applied.restarted);
    assert_eq!(engine.busy_threads(), 2);
    seen.extend(collect(&mut engine, Duration::from_millis(200)));
    assert!(seen.iter().all(|b| b.epoch == 0));
    assert_eq!(seen.last().unwrap().active_sines, 700);
    // Minimum load pads every thread past 30 % of the buffer, but is not load.
    let last = seen.last().unwrap();
    assert!(
        last.threads.iter().all(|t| t.busy_ns < 2_666_666),
        "padding is not counted as work"
    );

    c.threads = 3;
    c.driver_mode = DriverMode::WaitsForWorkers;
    let applied = engine.apply(c.clone(), |b| seen.push(b.clone())).unwrap();
    assert!(applied.restarted);
    assert_eq!(
        engine.threads().len(),
        4,
        "every thread has reported in when apply returns"
    );
    seen.extend(collect(&mut engine, Duration::from_millis(200)));
    let after: Vec<_> = seen.iter().filter(|b| b.epoch == 1).collect();
    assert!(after.len() > 20);
    assert!(after.iter().all(|b| b.threads.len() <= 4));
    assert_eq!(
        engine.threads().len(),
        4,
        "driver + 3 workers after the restart"
    );

    let mut bad = c.clone();
    bad.threads = 0;
    let err = engine.apply(bad, |_| {}).unwrap_err();
    assert!(err.to_string().contains("threads"), "{err}");
    assert_eq!(
        engine.config().threads,
        3,
        "a rejected change leaves everything as it was"
    );
    engine.stop(|_| {});
}

#[test]
fn sines_beyond_the_built_chord_grow_it_by_restarting() {
    let mut c = config(100, 2, 256);
    c.burst_sines = 0;
    c.chords = 1;
    let mut engine = start(c.clone());
    let chord = engine.chord_info();
    assert_eq!((chord.apl_max_sines, chord.extra_copies_built), (2058, 0));
    c.sines = 5000;
    c.kernel = xrunlab_dsp::Kernel::Fast;
    let applied = engine.apply(c, |_| {}).unwrap();
    assert!(applied.restarted);
    // 2058 of AudioPerfLab's, then xrunlab's own copies of about 2050 each.
    let chord = engine.chord_info();
    assert_eq!(chord.extra_copies_built, 2);
    assert_eq!(chord.extra_copies_in_play, 2);
    let seen = collect(&mut engine, Duration::from_millis(200));
    engine.stop(|_| {});
    assert!(seen.iter().any(|b| b.active_sines == 5000));
}

#[test]
fn the_offline_device_renders_the_whole_file() {
    let path = std::env::temp_dir().join(format!("xrunlab-offline-{}.wav", std::process::id()));
    let mut c = config(40, 2, 256);
    c.rt.priority = None;
    let device = OfflineDevice::new(48_000, 256, 48_000, path.clone());
    let mut engine = Engine::start(c, Box::new(device)).unwrap();
    let mut seen = Vec::new();
    for _ in 0..500 {
        engine.drain(|b| seen.push(b.clone()));
        if engine.device_ended().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let reason = engine.device_ended().expect("offline render finishes");
    engine.stop(|b| seen.push(b.clone()));
    assert!(reason.contains("48000 frames"), "{reason}");
    let reader = hound::WavReader::open(&path).unwrap();
    assert_eq!(reader.spec().channels, 2);
    assert_eq!(reader.len(), 96_000);
    assert_eq!(
        seen.iter().map(|b| u64::from(b.frames)).sum::<u64>(),
        48_000
    );
    assert!(
        seen.iter().all(|b| !b.late),
        "offline renders have no deadline"
    );
    let _ = std::fs::remove_file(path);
}

/// A device that cannot start says which kind of failure it was and keeps the underlying
/// error: here the offline render's file in a directory that does not exist (an io error,
/// through hound).
#[test]
fn a_device_that_cannot_start_is_an_io_error_that_keeps_its_source() {
    use std::error::Error;
    use xrunlab_engine::{DeviceErrorKind, EngineError};
    let path = std::env::temp_dir()
        .join(format!("xrunlab-no-such-dir-{}", std::process::id()))
        .join("out.wav");
    let mut c = config(40, 2, 256);
    c.rt.priority = None;
    let device = OfflineDevice::new(48_000, 256, 48_000, path.clone());
    let Err(EngineError::Device(e)) = Engine::start(c, Box::new(device)) else {
        panic!("the engine started with an unwritable render file");
    };
    assert_eq!(e.kind(), DeviceErrorKind::Io);
    assert!(
        e.to_string().starts_with("cannot create ") && e.to_string().contains("out.wav"),
        "{e}"
    );
    let source = e.source().expect("the io error is the source");
    let hound_error = source
        .downcast_ref::<hound::Error>()
        .expect("hound's error, which holds the io error");
    assert!(
        matches!(hound_error, hound::Error::IoError(io) if io.kind() == std::io::ErrorKind::NotFound)
    );
}
