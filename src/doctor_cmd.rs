//! `xrunlab doctor`: checks the machine, optionally applies one reversible setting and measures
//! process-local toggles, prints the report and writes the JSON; runs on the main thread (stop
//! signals only set flags it polls).

use crate::cli::doctor::DoctorArgs;
use crate::files;
use crate::Failure;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use xrunlab_doctor::apply::{self, Setting};
use xrunlab_doctor::journal;
use xrunlab_doctor::measure::{self, Plan, Toggle};
use xrunlab_doctor::{Options, Roots};
use xrunlab_engine::EngineConfig;
use xrunlab_results::doctor::{AppliedInfo, DoctorResult, SCHEMA};
use xrunlab_sys::Provenance;

/// The checks' options; --buffer and --rate were checked against the engine's ranges by their
/// parsers (`parse::within`).
fn options(args: &DoctorArgs) -> Result<Options, Failure> {
    Ok(Options {
        buffer_frames: args.buffer,
        sample_rate: args.rate,
        audio_priority: EngineConfig::default().rt.priority.unwrap_or(70),
    })
}

/// The engine settings every measurement starts from: the defaults at the doctor's buffer
/// and rate, without bursts (a burst in one arm only would decide the comparison).
fn measure_base(opts: &Options) -> EngineConfig {
    EngineConfig {
        buffer_frames: opts.buffer_frames,
        sample_rate: opts.sample_rate,
        burst_sines: 0,
        ..EngineConfig::default()
    }
}

fn roots(args: &DoctorArgs) -> Result<Roots, Failure> {
    let live = Roots::live();
    let pick =
        |flag: &str, given: &Option<PathBuf>, default: PathBuf| -> Result<PathBuf, Failure> {
            match given {
                None => Ok(default),
                Some(p) if p.is_dir() => Ok(p.clone()),
                Some(p) => Err(Failure::Usage(format!(
                    "invalid value '{}' for {flag}: not a directory",
                    p.display()
                ))),
            }
        };
    Ok(Roots {
        proc: pick("--proc-root", &args.proc_root, live.proc)?,
        sys: pick("--sys-root", &args.sys_root, live.sys)?,
        fs: pick("--fs-root", &args.fs_root, live.fs)?,
    })
}

/// Where the JSON goes: a file, or standard output for "-".
fn json_target(args: &DoctorArgs) -> Result<Option<Option<&Path>>, Failure> {
    match args.json.as_deref() {
        None => Ok(None),
        Some(p) if p == Path::new("-") => Ok(Some(None)),
        Some(p) => {
            files::check_writable("--json", p)?;
            Ok(Some(Some(p)))
        }
    }
}

/// `doctor --undo`: restores what a killed `--apply` left in force.
fn undo_journal(roots: &xrunlab_doctor::roots::Roots) -> Result<(), Failure> {
    match journal::find(roots)? {
        None => {
            println!("nothing to undo: no doctor --apply left settings in force");
            Ok(())
        }
        Some(journal::Found::OwnerRunning(j)) => Err(Failure::Runtime(format!(
            "`doctor --apply {}` is still running (pid {}); it undoes its setting when it exits \
             (stop it with Ctrl-C or `kill {}`)",
            j.setting, j.pid, j.pid
        ))),
        Some(journal::Found::EarlierBoot(j)) => {
            journal::remove(roots)?;
            println!(
                "discarded the undo journal of `doctor --apply {}` from before the last boot: the \
                 reboot reset what it had changed",
                j.setting
            );
            Ok(())
        }
        Some(journal::Found::Orphaned(j)) => {
            let restored = journal::undo(roots, &j).map_err(|e| {
                Failure::Runtime(format!(
                    "undoing {} failed: {e}; the journal is kept",
                    j.setting
                ))
            })?;
            for c in &restored {
                println!("restored {} = {} (was {})", c.path.display(), c.old, c.new);
            }
            println!(
                "{} undone: the values from before `doctor --apply` (pid {}) are back",
                j.setting, j.pid
            );
            Ok(())
        }
    }
}

pub fn doctor(args: &DoctorArgs) -> Result<(), Failure> {
    let opts = options(args)?;
    let roots = roots(args)?;
    let json = json_target(args)?;
    let to_stdout = json == Some(None);
    // The text report goes to stdout unless the JSON does.
    let say = |text: &str| {
        if to_stdout {
            eprint!("{text}");
        } else {
            print!("{text}");
        }
    };
    if args.undo {
        return undo_journal(&roots);
    }
    // A journal left by a doctor that was killed while a setting was applied.
    match journal::find(&roots) {
        Ok(None) => {}
        Ok(Some(journal::Found::Orphaned(j))) => say(&format!(
            "an earlier `doctor --apply {}` (pid {}) ended without undoing it: {} may still be in \
             force; `xrunlab doctor --undo` restores the previous values\n\n",
            j.setting,
            j.pid,
            j.changes
                .iter()
                .map(|c| format!("{} = {}", c.path.display(), c.new))
                .collect::<Vec<_>>()
                .join(", ")
        )),
        Ok(Some(journal::Found::OwnerRunning(j))) => say(&format!(
            "`doctor --apply {}` is running (pid {}) and will undo its setting when it exits\n\n",
            j.setting, j.pid
        )),
        Ok(Some(journal::Found::EarlierBoot(j))) => {
            let gone = journal::remove(&roots)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            say(&format!(
                "note: discarded the undo journal of `doctor --apply {}` from before the last boot \
                 (the reboot reset what it had changed){gone}\n\n",
                j.setting
            ));
        }
        Err(e) => say(&format!("warning: {e}\n\n")),
    }
    // Signals only set a flag (no immediate exit): an applied setting must be undone first.
    let stop = crate::signals::stop_flag().map_err(Failure::Runtime)?;
    let provenance = Provenance::collect(env!("CARGO_PKG_VERSION"), &roots.proc, &roots.sys);

    let mut applied = match args.apply {
        None => None,
        Some(setting) => match apply::apply(setting, &roots) {
            Ok(a) => {
                say(&format!(
                    "applied {}: {}\n  undo by hand: {}\n  {}\n\n",
                    setting.name(),
                    setting.describe(),
                    a.undo_commands().join(" && "),
                    if args.keep {
                        "kept after exit (--keep)"
                    } else {
                        "undone when the doctor exits (also on Ctrl-C, SIGTERM, SIGHUP)"
                    }
                ));
                Some(a)
            }
            Err(e) => return Err(e.into()),
        },
    };

    let probes = xrunlab_doctor::Probes {
        history: xrunlab_history::default_path(),
        ..xrunlab_doctor::probe::live()
    };
    let report = xrunlab_doctor::report::build(&roots, &probes, opts);
    say(&report.text());

    let measured = if args.measure {
        let base = measure_base(&opts);
        let plan = if args.quick {
            Plan::quick(base)
        } else {
            Plan::standard(base)
        };
        say("\nMeasuring (process-local settings only; nothing on the system is changed)\n");
        let should_stop = || stop.load(Ordering::SeqCst);
        let m = measure::measure(&plan, &Toggle::ALL, &should_stop, &mut |line| {
            eprintln!("  {line}")
        });
        say(&format!("\n{}", m.text()));
        Some(m)
    } else {
        None
    };

    if let (Some(_), Some(hold)) = (&applied, args.hold) {
        let name = args.apply.map_or("", Setting::name);
        eprintln!(
            "holding {name} for {} (Ctrl-C or SIGTERM ends it sooner)",
            humantime::format_duration(hold)
        );
        let t0 = Instant::now();
        while t0.elapsed() < hold && !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    let mut undo_error = None;
    let applied_info = applied.take().map(|a| {
        let setting = a.setting();
        let undo = a.undo_commands().join(" && ");
        let (changes, end) = if args.keep {
            let changes = a.keep();
            say(&format!(
                "\n{} kept in force; undo by hand: {undo}\n",
                setting.name()
            ));
            (changes, "kept (--keep)".to_owned())
        } else {
            let changes = a.changes().to_vec();
            match a.undo() {
                Ok(_) => {
                    say(&format!(
                        "\n{} undone: the previous values are back\n",
                        setting.name()
                    ));
                    (changes, "undone on exit".to_owned())
                }
                Err(e) => {
                    let msg = format!(
                        "undoing {} failed: {e}; undo by hand: {undo}",
                        setting.name()
                    );
                    undo_error = Some(msg.clone());
                    (changes, msg)
                }
            }
        };
        AppliedInfo {
            setting: setting.name().to_owned(),
            description: setting.describe().to_owned(),
            changes,
            end,
        }
    });

    let exit_status = u8::from(report.failed() || undo_error.is_some());
    if let Some(target) = json {
        let mut provenance = provenance;
        provenance.finish();
        let result = DoctorResult {
            schema: SCHEMA.to_owned(),
            provenance,
            report: report.clone(),
            measure: measured.clone(),
            applied: applied_info.clone(),
            exit_status,
        };
        match target {
            None => {
                let text = serde_json::to_string_pretty(&result).map_err(|e| {
                    Failure::Runtime(format!("cannot serialize the doctor's result: {e}"))
                })?;
                println!("{text}");
            }
            Some(path) => xrunlab_results::write::write_json(path, &result)?,
        }
    }
    if let Some(e) = undo_error {
        return Err(Failure::Runtime(e));
    }
    if report.failed() {
        return Err(Failure::Runtime(format!(
            "{} check(s) failed (marked FAIL above)",
            report.counts.fail
        )));
    }
    Ok(())
}
