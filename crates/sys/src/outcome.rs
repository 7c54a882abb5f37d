//! `Outcome`: what happened when we asked the kernel for something. Plain data, built by
//! whichever thread made the request and read by reporting threads.

use serde::{Deserialize, Serialize};

/// The result of one request to the kernel (a policy, an affinity, a memory lock...), kept as
/// data so results files and dashboards can say exactly what a run got and what it fell back to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    /// The caller did not ask for this.
    NotRequested,
    /// The kernel accepted the request.
    Applied {
        /// What is now in effect, e.g. "SCHED_FIFO priority 70".
        detail: String,
    },
    /// The request was refused (by validation or by the kernel) and something else is in effect.
    Refused {
        /// Why, starting with the errno name, e.g. "EPERM: operation not permitted (...)".
        reason: String,
        /// What the thread or process runs with instead, e.g. "SCHED_OTHER nice 0".
        fallback: String,
    },
    /// This kernel or machine does not have the feature at all.
    Unsupported {
        /// Why, e.g. "not supported by this kernel (CONFIG_UCLAMP_TASK missing)".
        reason: String,
    },
}

impl Outcome {
    /// True only when the request is in effect.
    pub fn took_effect(&self) -> bool {
        matches!(self, Outcome::Applied { .. })
    }

    /// One human-readable line for logs and dashboards.
    pub fn summary(&self) -> String {
        match self {
            Outcome::NotRequested => "not requested".to_owned(),
            Outcome::Applied { detail } => format!("applied: {detail}"),
            Outcome::Refused { reason, fallback } => {
                format!("refused: {reason}; running with {fallback}")
            }
            Outcome::Unsupported { reason } => format!("unsupported: {reason}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_applied_takes_effect() {
        let applied = Outcome::Applied {
            detail: "SCHED_FIFO priority 70".into(),
        };
        let refused = Outcome::Refused {
            reason: "EPERM: operation not permitted".into(),
            fallback: "SCHED_OTHER nice 0".into(),
        };
        let unsupported = Outcome::Unsupported {
            reason: "not supported by this kernel".into(),
        };
        assert!(applied.took_effect());
        assert!(!refused.took_effect());
        assert!(!unsupported.took_effect());
        assert!(!Outcome::NotRequested.took_effect());
        assert_eq!(applied.summary(), "applied: SCHED_FIFO priority 70");
        assert_eq!(
            refused.summary(),
            "refused: EPERM: operation not permitted; running with SCHED_OTHER nice 0"
        );
        assert_eq!(
            unsupported.summary(),
            "unsupported: not supported by this kernel"
        );
        assert_eq!(Outcome::NotRequested.summary(), "not requested");
    }

    #[test]
    fn serializes_with_a_status_tag() {
        let refused = Outcome::Refused {
            reason: "EBUSY".into(),
            fallback: "SCHED_FIFO 70".into(),
        };
        let json = serde_json::to_string(&refused).unwrap();
        assert_eq!(
            json,
            r#"{"status":"refused","reason":"EBUSY","fallback":"SCHED_FIFO 70"}"#
        );
        assert_eq!(serde_json::from_str::<Outcome>(&json).unwrap(), refused);
        assert_eq!(
            serde_json::to_string(&Outcome::NotRequested).unwrap(),
            r#"{"status":"not_requested"}"#
        );
    }
}
