//! What an experiment needs from its caller: when to stop early and where to show progress;
//! used on the caller's thread.

use indicatif::ProgressBar;

/// What an experiment needs from its caller: when to stop early, and where to show progress.
pub struct Ctx<'a> {
    /// Returns true once the experiment should stop (Ctrl-C, SIGTERM); polled from the caller's thread only.
    pub stop: &'a (dyn Fn() -> bool + Sync),
    /// Progress display; [`ProgressBar::hidden`] shows nothing.
    pub progress: ProgressBar,
}

impl<'a> Ctx<'a> {
    /// A context that never stops and shows nothing (tests, libraries).
    pub fn silent(stop: &'a (dyn Fn() -> bool + Sync)) -> Ctx<'a> {
        Ctx {
            stop,
            progress: ProgressBar::hidden(),
        }
    }

    /// Whether the experiment should stop now.
    pub fn stopped(&self) -> bool {
        (self.stop)()
    }
}

/// Progress bar style shared by the experiments: position, length and a message.
pub fn start_progress(ctx: &Ctx, len: u64, what: &str) {
    ctx.progress.set_length(len);
    ctx.progress.set_position(0);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed}, eta {eta})",
    ) {
        ctx.progress.set_style(style.progress_chars("=> "));
    }
    ctx.progress.set_prefix(what.to_string());
}
