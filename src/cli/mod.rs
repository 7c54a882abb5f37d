//! The command line: `Cli` and its `Command`s (clap derive), each command family's arguments in its
//! own module, the value parsers they share in the leaf `parse`; parsed on the main thread.
//!
//! Only this module joins families: the families use `parse` and nothing else of `cli`, so the
//! engine's flags (`run::EngineArgs`) reach the dashboard and `bench soak` as a type parameter
//! given here.

pub mod bench;
pub mod compare;
pub mod dashboard;
pub mod docs;
pub mod doctor;
pub mod history;
pub mod lab;
pub mod parse;
pub mod record;
pub mod report;
pub mod run;
pub mod watch;

use clap::{Parser, Subcommand};
use run::EngineArgs;

/// The dashboard's flags with the engine's.
pub type DashboardArgs = dashboard::DashboardArgs<EngineArgs>;
/// `bench`'s flags, `bench soak`'s with the engine's.
pub type BenchArgs = bench::BenchArgs<EngineArgs>;
/// `bench`'s modes, `bench soak`'s with the engine's flags.
pub type BenchMode = bench::BenchMode<EngineArgs>;
/// `bench soak`'s flags with the engine's.
pub type SoakArgs = bench::SoakArgs<EngineArgs>;

/// xrunlab: a lab for real-time audio performance on Linux multi-core machines.
///
/// With no subcommand it starts the engine on the default device and serves
/// the live dashboard.
#[derive(Debug, Parser)]
#[command(name = "xrunlab", version, about, long_about = None, args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub dashboard: DashboardArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the live dashboard (the default when no subcommand is given).
    Dashboard(DashboardArgs),
    /// Run the engine headless for a duration and print a summary.
    Run(run::RunArgs),
    /// Render the chord offline, as fast as possible, into a WAV file.
    Render(run::RenderArgs),
    /// Measure kernel throughput and engine overhead, and print a table.
    Bench(BenchArgs),
    /// Probes: timer wake-up latency, the cost of sleeping, thread placement.
    Probe(lab::ProbeArgs),
    /// Sweeps: throughput against threads and scheduling class.
    Sweep(lab::SweepArgs),
    /// Check this machine for low-latency audio; --measure proves fixes by measuring them.
    Doctor(doctor::DoctorArgs),
    /// VoiceMark, LatencyMark and burst response: the largest dropout-free sine count per buffer
    /// and preset, the smallest buffer for a load, the largest burst a steady load absorbs.
    Capacity(lab::CapacityArgs),
    /// Draw result files (run and experiment JSON) in one self-contained HTML page.
    Report(report::ReportArgs),
    /// Name the culprit of every xrun in the live PipeWire or JACK graph: the late node, and
    /// what the kernel says took its time. Read-only: it changes nothing in the graph.
    Watch(watch::WatchArgs),
    /// The flight recorder's history: the xruns on file with their causes, the top culprits,
    /// and what changed on the machine (drift) among them; or one xrun's stored trace.
    History(history::HistoryArgs),
    /// The flight recorder: watch's analysis left running, every xrun's card kept in a SQLite
    /// history with the drift that preceded it (see `history`); survives server restarts.
    Record(record::RecordArgs),
    /// Did it get better? Compare run results (repeats, machines, kernels, settings) side A
    /// against side B per metric, with a 95 % interval, a verdict and its chance under noise.
    Compare(compare::CompareArgs),
    /// A/B of two sets of engine flags: the engine run interleaved (A, B, A, B, …), every run
    /// written as a run result, then compared as `compare` does.
    Ab(compare::AbArgs),
    /// Write the man pages (one per command) from these definitions: the top page to standard
    /// output, or every page into --dir.
    Man(docs::ManArgs),
    /// Print a shell completion script for these commands and flags.
    Completions(docs::CompletionsArgs),
    /// Print a backtrace of this call, to check that backtraces name files and lines (they do
    /// where the debug file is installed; see the install page). Hidden: a diagnostic.
    #[command(hide = true)]
    DebugBacktrace,
}
