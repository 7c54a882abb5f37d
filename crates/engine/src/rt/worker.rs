//! The processing-thread loop: wait for a cycle, claim chunks, report, pad to the minimum load;
//! runs on the engine's worker threads.

use super::alloc_probe::RtSection;
use super::clock::{now_ns, spin_until};
use super::cycle::{work_and_record, CycleShared};
use super::records::{RecordTx, ThreadRecord};
use std::sync::atomic::Ordering;

/// Runs until `shared.stop` is set. `slot` is this worker's scratch slot.
/// `seen` is the generation before any cycle was published, read by the engine
/// before the device starts: a worker that read it itself, after reporting
/// ready, could read a cycle already published and wait for the next one, which
/// never comes while the driver waits for this worker to finish the first.
pub(crate) fn run(
    shared: &CycleShared,
    slot: usize,
    mut records: RecordTx<ThreadRecord>,
    mut seen: u32,
) {
    loop {
        let generation = shared.wait_for_cycle(seen);
        seen = generation;
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        let _rt = RtSection::enter();
        let mut record = ThreadRecord {
            seq: shared.seq.load(Ordering::Relaxed),
            wake_ns: now_ns(),
            ..ThreadRecord::default()
        };
        // SAFETY: our own slot, during the cycle published by the generation we
        // just read; the driver publishes no other until we call `finish`.
        unsafe { work_and_record(shared, Some(slot), &mut record) };
        let pad_until = shared.pad_until_ns.load(Ordering::Relaxed);
        records.push(record);
        shared.finish(slot, generation);
        if pad_until > record.end_ns {
            spin_until(pad_until);
        }
    }
}
