use std::time::Duration;
use xrunlab_engine::device::sim::SimDevice;
use xrunlab_engine::{Engine, EngineConfig};

#[test]
fn sim_runs() {
    let mut c = EngineConfig::default();
    c.sines = 300;
    let mut e = Engine::start(c, Box::new(SimDevice::new(48_000, 128, false))).unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let mut n = 0;
    let mut loads = vec![];
    let mut shares = vec![];
    e.drain(|b| {
        n += 1;
        loads.push(b.load());
        shares.push((
            b.active_sines,
            b.threads.iter().map(|t| t.sines).collect::<Vec<_>>(),
            b.threads
                .iter()
                .map(|t| t.wake_latency_ns)
                .collect::<Vec<_>>(),
            b.late,
        ));
    });
    eprintln!(
        "n={n} last={:?} {:?}",
        &loads[loads.len() - 3..],
        &shares[shares.len() - 3..]
    );
    eprintln!("threads {:#?}", e.threads());
    e.stop(|_| {});
}
