//! The times a question about the history takes (`history --since`, the dashboard's
//! `/api/history?since=`): a span back from now (`30m`, `1h`, `2d`) or a UTC time; parsed on
//! whichever thread asks.

use crate::rows::unix_ns;
use std::time::SystemTime;

/// A time that is neither a span back from now nor a UTC time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{text:?}: neither a span back from now (30m, 1h, 2d) nor a UTC time \
     (2026-11-25T14:00:00Z or 2026-11-25 14:00:00)"
)]
pub struct WhenError {
    /// What was given.
    pub text: String,
}

/// `text` as ns since the Unix epoch: a span back from `now` (`30m`, `1h`, `2d`: humantime's
/// spans), or a UTC time (`2026-11-25T14:00:00Z`, `2026-11-25 14:00:00`).
pub fn parse_when(text: &str, now: SystemTime) -> Result<i64, WhenError> {
    if let Ok(span) = humantime::parse_duration(text) {
        return Ok(unix_ns(
            now.checked_sub(span).unwrap_or(SystemTime::UNIX_EPOCH),
        ));
    }
    humantime::parse_rfc3339_weak(text)
        .map(unix_ns)
        .map_err(|_| WhenError {
            text: text.to_owned(),
        })
}

#[cfg(test)]
mod tests {
    use super::parse_when;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    #[test]
    fn spans_count_back_from_now_and_times_are_utc() {
        let now = UNIX_EPOCH + Duration::from_secs(10_000);
        assert_eq!(parse_when("1h", now).unwrap(), 6_400_000_000_000);
        assert_eq!(parse_when("30m", now).unwrap(), 8_200_000_000_000);
        assert_eq!(
            parse_when("1970-01-01T00:00:10Z", now).unwrap(),
            10_000_000_000
        );
        assert_eq!(
            parse_when("1970-01-01 00:01:00", SystemTime::now()).unwrap(),
            60_000_000_000
        );
        let e = parse_when("yesterday", now).unwrap_err();
        assert_eq!(
            e.to_string(),
            "\"yesterday\": neither a span back from now (30m, 1h, 2d) nor a UTC time \
             (2026-11-25T14:00:00Z or 2026-11-25 14:00:00)"
        );
    }
}
