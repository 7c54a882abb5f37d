//! The few facts that only a syscall can tell: whether SCHED_FIFO (and at what priority) and
//! uclamp can really be set. Each is tried on a scratch thread that ends right after, so the
//! doctor's own threads never change. Runs on the main thread (which spawns the scratch).

use xrunlab_sys::sched::{apply_to_current_thread, RtRequest};
use xrunlab_sys::Outcome;

pub use xrunlab_results::doctor::Probes;

/// Tries SCHED_FIFO at 99, then at the process's RLIMIT_RTPRIO when that is lower, and
/// uclamp_min 512, each on a scratch thread.
pub fn live() -> Probes {
    let mut attempts = Vec::new();
    let mut fifo_max_priority = None;
    let mut candidates = vec![99u8];
    if let Some(limit) = rtprio_limit().filter(|&l| (1..99).contains(&l)) {
        candidates.push(limit as u8);
    }
    for priority in candidates {
        let report = on_scratch_thread(move || {
            apply_to_current_thread(&RtRequest {
                priority: Some(priority),
                ..RtRequest::default()
            })
        });
        match report {
            Some(r) if r.priority.took_effect() => {
                attempts.push(format!("{priority}: obtained ({})", r.obtained));
                fifo_max_priority = Some(priority);
                break;
            }
            Some(r) => attempts.push(format!("{priority}: {}", r.priority.summary())),
            None => attempts.push(format!("{priority}: the scratch thread could not start")),
        }
    }
    let uclamp = on_scratch_thread(|| {
        apply_to_current_thread(&RtRequest {
            uclamp_min: Some(512),
            ..RtRequest::default()
        })
        .uclamp
    })
    .unwrap_or(Outcome::Unsupported {
        reason: "the scratch thread could not start".to_owned(),
    });
    Probes {
        fifo_max_priority,
        fifo_attempts: attempts,
        uclamp,
        // The caller that knows the recorder's default place fills it (the binary, from the
        // history crate), so that the rule is written once.
        history: None,
    }
}

fn on_scratch_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    std::thread::Builder::new()
        .name("xrl-doctor-probe".to_owned())
        .spawn(f)
        .ok()?
        .join()
        .ok()
}

/// The soft RLIMIT_RTPRIO of this process.
fn rtprio_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a live rlimit that getrlimit fills in.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_RTPRIO, &mut limit) };
    (rc == 0).then_some(limit.rlim_cur)
}
