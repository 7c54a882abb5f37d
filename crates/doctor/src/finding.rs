//! A finding: one checked fact about the machine, with its status, reason, fix and source
//! (the types live in xrunlab-results, beside the doctor's result file), and the checks' helper
//! that makes them. Built by the checks on the calling (main) thread.

pub use xrunlab_results::doctor::{Area, Counts, Finding, Status};

/// One check's identity: it makes that check's findings, each with its status, reason and
/// source, so a check names its id, area and title once.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Check<'a> {
    id: &'a str,
    area: Area,
    title: &'a str,
}

impl<'a> Check<'a> {
    /// The check `id` ("cpu.governor") of `area`, titled `title`.
    pub(crate) const fn new(id: &'a str, area: Area, title: &'a str) -> Check<'a> {
        Check { id, area, title }
    }

    /// Its finding with this status.
    pub(crate) fn finding(
        &self,
        status: Status,
        reason: impl Into<String>,
        source: impl Into<String>,
    ) -> Finding {
        Finding::new(self.id, self.area, self.title, status, reason, source)
    }

    /// It passes.
    pub(crate) fn pass(&self, reason: impl Into<String>, source: impl Into<String>) -> Finding {
        self.finding(Status::Pass, reason, source)
    }

    /// A warning.
    pub(crate) fn warn(&self, reason: impl Into<String>, source: impl Into<String>) -> Finding {
        self.finding(Status::Warn, reason, source)
    }

    /// A failure.
    pub(crate) fn fail(&self, reason: impl Into<String>, source: impl Into<String>) -> Finding {
        self.finding(Status::Fail, reason, source)
    }

    /// The fact could not be read.
    pub(crate) fn unknown(&self, reason: impl Into<String>, source: impl Into<String>) -> Finding {
        self.finding(Status::Unknown, reason, source)
    }
}
