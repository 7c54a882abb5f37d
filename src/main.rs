//! The `xrunlab` binary: parses arguments, dispatches to a command, and maps errors to exit codes
//! in one place; runs on the main thread.

mod ab_cmd;
mod bench_cmd;
mod bench_compare;
mod bench_explain;
mod bench_record;
mod bench_soak;
mod bench_watch;
mod cli;
mod compare_cmd;
mod compare_text;
mod csv_out;
mod dashboard_cmd;
mod devices;
mod doctor_cmd;
mod explain_run;
mod explain_text;
mod failure;
mod files;
mod history_cmd;
mod jack_support;
mod lab_cmd;
mod man_cmd;
mod record_cmd;
mod report_cmd;
mod run_cmd;
mod run_file;
mod signals;
mod summary_text;
mod trace_file;
mod watch_cmd;
mod watch_source;
mod watch_view;

use clap::Parser;
pub use failure::Failure;

/// For the commands that only print a report (and so are piped into `head` or `less`): a reader
/// that goes away ends the process quietly, as it ends `grep`, instead of a panic on the next
/// print. The long runs (run, watch, record, the dashboard) keep Rust's default (the signal
/// ignored), so that a closed pipe is never a signal that kills them between writing their
/// results; a print to a closed stdout still fails there (left: their prints do not yet stop
/// quietly on EPIPE).
fn end_quietly_on_a_closed_pipe(command: Option<&cli::Command>) {
    use cli::Command as C;
    if let Some(C::History(_) | C::Compare(_) | C::Doctor(_) | C::Man(_) | C::Completions(_)) =
        command
    {
        // SAFETY: restores the default action of one signal before any thread is started.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
}

fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    end_quietly_on_a_closed_pipe(cli.command.as_ref());
    let outcome = match &cli.command {
        Some(cli::Command::Run(args)) => run_cmd::run(args),
        Some(cli::Command::Render(args)) => run_cmd::render(args),
        Some(cli::Command::Bench(args)) => bench_cmd::bench(args),
        Some(cli::Command::Dashboard(args)) => dashboard_cmd::dashboard(args),
        Some(cli::Command::Probe(args)) => lab_cmd::probe(args),
        Some(cli::Command::Sweep(args)) => lab_cmd::sweep(args),
        Some(cli::Command::Doctor(args)) => doctor_cmd::doctor(args),
        Some(cli::Command::Capacity(args)) => lab_cmd::capacity(args),
        Some(cli::Command::Report(args)) => report_cmd::report(args),
        Some(cli::Command::Watch(args)) => watch_cmd::watch(args),
        Some(cli::Command::History(args)) => history_cmd::history(args),
        Some(cli::Command::Record(args)) => record_cmd::record(args),
        Some(cli::Command::Compare(args)) => compare_cmd::compare_cmd(args),
        Some(cli::Command::Ab(args)) => ab_cmd::ab(args),
        Some(cli::Command::Man(args)) => man_cmd::man(args),
        Some(cli::Command::Completions(args)) => man_cmd::completions(args),
        Some(cli::Command::DebugBacktrace) => failure::print_backtrace(),
        None => dashboard_cmd::dashboard(&cli.dashboard),
    };
    failure::exit_code(outcome)
}
