//! `xrunlab bench explain`: the lab crate's explain-cost experiment (`probe explain-cost`), printed
//! as it goes (each run's row, the comparison, the cost per event, the capacity searches) and
//! written as the experiments' JSON after every part, so an interrupted bench keeps what it
//! measured; runs on the main thread.

use crate::cli::bench::ExplainBenchArgs;
use crate::signals::StopSignals;
use crate::{files, Failure};
use xrunlab_lab::explain_cost::{self as ec, ExplainCost, Step};
use xrunlab_lab::{Ctx, Experiment, LabResult};
use xrunlab_sys::{Fingerprint, Provenance};

/// The experiments' envelope around `b`: incomplete with `end` until the bench ends.
fn envelope<'a>(
    provenance: &Provenance,
    fingerprint: &Fingerprint,
    quick: bool,
    b: &'a ExplainCost,
    end: Option<&str>,
) -> LabResult<&'a ExplainCost> {
    let mut provenance = provenance.clone();
    provenance.finish();
    let mut fingerprint = fingerprint.clone();
    fingerprint.finish(xrunlab_sys::default_proc_root());
    LabResult {
        schema: xrunlab_lab::envelope::SCHEMA.to_owned(),
        kind: <ExplainCost as Experiment>::KIND.to_owned(),
        provenance,
        fingerprint,
        quick,
        incomplete: end.is_some() || !b.complete,
        end_reason: end.unwrap_or("completed").to_owned(),
        warnings: b.warnings(),
        result: b,
    }
}

pub fn explain(a: &ExplainBenchArgs) -> Result<(), Failure> {
    let params = crate::lab_cmd::explain_cost_params(a.quick, &a.flags)?;
    if let Some(p) = &a.json {
        files::check_writable("--json", p)?;
    }
    let signals = StopSignals::install().map_err(Failure::Runtime)?;
    let provenance = Provenance::collect(
        env!("CARGO_PKG_VERSION"),
        xrunlab_sys::default_proc_root(),
        xrunlab_sys::default_sys_root(),
    );
    let fingerprint = Fingerprint::collect(
        xrunlab_sys::default_proc_root(),
        xrunlab_sys::default_sys_root(),
    );
    let stop = || signals.received().is_some();
    let ctx = Ctx::silent(&stop);
    let mut json_error = None;
    let mut save = |b: &ExplainCost, end: Option<&str>| {
        if let Some(p) = &a.json {
            let lab = envelope(&provenance, &fingerprint, a.quick, b, end);
            if let Err(e) = xrunlab_results::write::write_json(p, &lab) {
                json_error.get_or_insert(e);
            }
        }
    };
    let running = Some("running: these are the figures measured so far");
    let b = ec::run(&params, &ctx, &mut |step, b| match step {
        Step::Started => print!("{}", ec::header_text("bench explain", b)),
        Step::Run => {
            if let Some(r) = b.runs.last() {
                print!("{}", ec::run_text(r));
            }
            save(b, running);
        }
        Step::Compared => print!("{}", ec::comparison_text(b)),
        Step::EventCost => {
            print!("{}", ec::event_cost_text(b));
            save(b, running);
        }
        Step::CapacityStarts(explain) => eprintln!(
            "capacity search {} --explain...",
            if explain { "with" } else { "without" }
        ),
        Step::Capacity => save(b, running),
        Step::CapacityDone => print!("{}", ec::capacity_text(b)),
    })?;
    let end = match signals.received() {
        Some(signal) => Some(format!(
            "interrupted by {signal}; the runs measured until then are kept"
        )),
        None if !b.complete => Some("stopped early; the runs measured until then are kept".into()),
        None => None,
    };
    save(&b, end.as_deref());
    if let Some(end) = &end {
        println!("incomplete: {end}");
    }
    match json_error {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}
