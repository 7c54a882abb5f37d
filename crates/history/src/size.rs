//! Sizes as the command line takes them (`200MB`, `1.5GiB`, `4096`); parsed on the main thread.

/// Parses a size in bytes: a number with an optional unit, B, kB/KB, MB, GB, TB (powers of
/// 1000) or KiB, MiB, GiB, TiB (powers of 1024), case-insensitive, with or without a space.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let s = text.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = (&s[..split], s[split..].trim());
    let unit_bytes: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" | "k" => 1000,
        "mb" | "m" => 1000_u64.pow(2),
        "gb" | "g" => 1000_u64.pow(3),
        "tb" | "t" => 1000_u64.pow(4),
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        _ => {
            return Err(format!(
            "{text:?}: unknown size unit {unit:?} (allowed: B, kB, MB, GB, TB, KiB, MiB, GiB, TiB)"
        ))
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a size (a number and a unit, e.g. 200MB)"))?;
    let bytes = value * unit_bytes as f64;
    if !bytes.is_finite() || bytes < 1.0 || bytes > u64::MAX as f64 {
        return Err(format!("{text:?} is not a usable size (1 byte or more)"));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_take_decimal_and_binary_units() {
        assert_eq!(parse_size("200MB"), Ok(200_000_000));
        assert_eq!(parse_size("1.5 GiB"), Ok(3 << 29));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("2kib"), Ok(2048));
    }

    #[test]
    fn a_bad_size_says_what_is_allowed() {
        let e = parse_size("200 parsecs").unwrap_err();
        assert!(e.contains("allowed: B, kB"), "{e}");
        assert!(parse_size("MB").unwrap_err().contains("not a size"));
        assert!(parse_size("0MB").unwrap_err().contains("1 byte or more"));
    }
}
