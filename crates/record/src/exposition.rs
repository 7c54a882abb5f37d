//! The Prometheus text exposition format (version 0.0.4), written by hand: it is a few lines,
//! and the one Rust client (prometheus-client) did not escape label values when this was
//! written (its issue #151), which a node named with a quote would turn into a scrape that
//! Prometheus rejects whole. Used on the metrics endpoint's thread.

use std::fmt::Write;

/// A label value as the text format needs it: backslash, double quote and line feed escaped
/// (`\\`, `\"`, `\n`); everything else, any UTF-8, as is.
pub fn escape_label_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Writes the `# HELP` and `# TYPE` lines of a metric family (help text escaped as the format
/// asks: backslash and line feed).
pub fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let help = help.replace('\\', "\\\\").replace('\n', "\\n");
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Writes one sample: `name{label="value",…} value`.
pub fn sample(
    out: &mut String,
    name: &str,
    labels: &[(&str, &str)],
    value: impl std::fmt::Display,
) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{k}=\"{}\"", escape_label_value(v));
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_escape_exactly_backslash_quote_and_line_feed() {
        assert_eq!(
            escape_label_value("a\\b\"c\nd\té"),
            "a\\\\b\\\"c\\nd\té",
            "a tab and non-ASCII stay as they are"
        );
        let mut out = String::new();
        sample(&mut out, "m", &[("node", "my \"synth\"")], 3);
        assert_eq!(out, "m{node=\"my \\\"synth\\\"\"} 3\n");
    }
}
