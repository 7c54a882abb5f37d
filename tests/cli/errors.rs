//! Every invalid flag value is a usage error: exit code 2 and a message naming the flag and what is
//! allowed.

use crate::{usage_error, xrunlab};

/// The command line and the dashboard API read one table of ranges: the same out-of-range
/// value is refused by both, with the same allowed range.
#[test]
fn the_command_line_and_the_api_refuse_a_value_with_the_same_range() {
    use serde_json::json;
    use xrunlab_dash::api::merge_config;
    use xrunlab_engine::EngineConfig;
    let cases = [
        ("--rate", "7999", json!({"sample_rate": 7999})),
        ("--buffer", "8193", json!({"buffer_frames": 8193})),
        ("--chords", "257", json!({"chords": 257})),
        ("--threads", "65", json!({"threads": 65})),
        ("--chunk-size", "0", json!({"chunk_size": 0})),
        ("--min-load", "101", json!({"min_load_pct": 101})),
        ("--driver-spin", "1001", json!({"driver_spin_us": 1001})),
        ("--busy-threads", "5", json!({"busy": {"count": 5}})),
        ("--busy-period", "4", json!({"busy": {"period_ms": 4}})),
        ("--busy-duty", "150", json!({"busy": {"duty_pct": 150}})),
        ("--priority", "0", json!({"rt": {"priority": 0}})),
        (
            "--deadline-runtime",
            "0",
            json!({"rt": {"deadline": true, "deadline_runtime_pct": 0}}),
        ),
        ("--uclamp-min", "1025", json!({"rt": {"uclamp_min": 1025}})),
    ];
    for (flag, value, body) in cases {
        let api = merge_config(&EngineConfig::default(), &body)
            .expect_err(&format!("the API takes {body}"));
        let allowed = api.allowed.unwrap_or_default();
        assert!(!allowed.is_empty(), "{body}: {}", api.error);
        let mut args = vec!["run", flag, value];
        if flag == "--deadline-runtime" {
            args.push("--deadline");
        }
        usage_error(&args, &[flag, &format!("allowed {allowed}")]);
    }
}

#[test]
fn bad_values_are_usage_errors_that_say_what_is_allowed() {
    let cases: &[(&[&str], &[&str])] = &[
        (&["run", "--rate", "7999"], &["--rate", "8000..=384000"]),
        (&["run", "--rate", "400000"], &["--rate", "8000..=384000"]),
        (&["run", "--buffer", "15"], &["--buffer", "16..=8192"]),
        (&["run", "--buffer", "8193"], &["--buffer", "16..=8192"]),
        (
            &["run", "--sines", "99999999"],
            &["--sines", "at 48000 Hz", "one chord is 2058 partials"],
        ),
        (
            &["run", "--rate", "44100", "--sines", "99999999"],
            &["at 44100 Hz", "one chord is 1891 partials"],
        ),
        (
            &[
                "run", "--chord", "apl-2020", "--chords", "1", "--sines", "99999999",
            ],
            &[
                "AudioPerfLab's range is 0..=1717",
                "one chord is 1717 partials",
            ],
        ),
        (
            &["run", "--chord", "major"],
            &["--chord", "\"apl\", \"apl-2020\""],
        ),
        (&["run", "--chords", "0"], &["--chords", "1..=256"]),
        (&["run", "--chords", "257"], &["--chords", "1..=256"]),
        (&["run", "--threads", "0"], &["--threads", "1..=64"]),
        (&["run", "--threads", "65"], &["--threads", "1..=64"]),
        (
            &["run", "--duration", "0s"],
            &["--duration", "longer than 0"],
        ),
        (&["run", "--duration", "ten"], &["--duration"]),
        (&["run", "--min-load", "101"], &["--min-load", "0..=100"]),
        (&["run", "--min-load", "-1"], &["--min-load"]),
        (
            &["run", "--preset", "fastest"],
            &["--preset", "standard", "optimal", "custom"],
        ),
        (
            &["run", "--busy-threads", "5"],
            &["--busy-threads", "0..=4"],
        ),
        (
            &["run", "--busy-period", "101"],
            &["--busy-period", "5..=100"],
        ),
        (&["run", "--busy-duty", "150"], &["--busy-duty", "0..=100"]),
        (&["run", "--priority", "0"], &["--priority", "1..=99"]),
        (
            &["run", "--driver-spin", "1001"],
            &["--driver-spin", "0..=1000"],
        ),
        (
            &["run", "--driver-spin", "-1"],
            &["--driver-spin", "0..=1000"],
        ),
        (
            &["run", "--hang-worker", "2", "--hang-every", "1s"],
            &["--hang-worker", "1..=1"],
        ),
        (
            &["run", "--kernel-slowdown", "17"],
            &["--kernel-slowdown", "1..=16"],
        ),
        (
            &["run", "--kernel-slowdown", "-1"],
            &["--kernel-slowdown", "1..=16"],
        ),
        (&["run", "--cpus", "3-1"], &["--cpus"]),
        (
            &["dashboard", "--stall", "2s", "--stall-every", "1s"],
            &["--stall", "2000 ms; allowed 0..=1000 ms"],
        ),
        (
            &["dashboard", "--stall", "5ms", "--stall-every", "5ms"],
            &["--stall-every", "allowed 10..=60000 ms"],
        ),
        (&["run", "--device", "alsa"], &["--device", "sim", "jack"]),
        (&["render"], &["--out"]),
    ];
    for (args, expect) in cases {
        usage_error(args, expect);
    }
}

#[test]
fn bad_dashboard_tokens_are_usage_errors_that_say_what_is_allowed() {
    let allowed = "16 to 256 characters of A-Z a-z 0-9 - . _ ~";
    let long = "t".repeat(257);
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["--token", ""],
            &["--token", "must not be empty", allowed, "--no-token"],
        ),
        (
            &["dashboard", "--token", ""],
            &["--token", "must not be empty", allowed],
        ),
        (
            &["dashboard", "--token", "two words"],
            &["--token", "' '", allowed],
        ),
        (
            &["dashboard", "--token", "a;b"],
            &["--token", "';'", allowed],
        ),
        (
            // Guessable: a usage error, not a dashboard that takes it.
            &["dashboard", "--token", "abc"],
            &["--token", "3 characters long, too short", allowed],
        ),
        (
            &["dashboard", "--token", "fifteen-chars15"],
            &["--token", "15 characters long, too short", allowed],
        ),
        (
            &["dashboard", "--token", &long],
            &["--token", "257 bytes", allowed],
        ),
        (
            &["dashboard", "--token", "sixteen-chars-16", "--no-token"],
            &["--token", "--no-token", "cannot be used with"],
        ),
    ];
    for (args, expect) in cases {
        usage_error(args, expect);
    }
    // The same rules for the token given through the environment.
    let out = xrunlab()
        .args(["dashboard", "--port", "0"])
        .env("XRUNLAB_TOKEN", "")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("must not be empty"), "{stderr}");
}
