//! Checks the bytes of an HdrHistogram V2 histogram (plain or DEFLATE-compressed) before
//! hdrhistogram's deserializer sees them, and returns them uncompressed. That deserializer
//! sizes its buffer from the header's payload length before reading (a 40-byte text can ask
//! for 4 GiB), makes a counts array as large as the header's bounds ask, and negates a zero
//! run of `i64::MIN` (a debug-build panic); here each of those is an error naming what is
//! wrong. Runs on the main thread.

use flate2::read::ZlibDecoder;
use std::borrow::Cow;
use std::io::Read as _;

/// Counters a decoded histogram may hold: 8 MiB of `u64`s. The engine's histograms hold
/// about 25,000; HdrHistogram's most precise (5 digits) over all of `u64` holds 6.3 million.
pub const MAX_COUNTERS: u64 = 1 << 20;

/// The plain V2 cookie, and the compressed one (hdrhistogram's `V2_COOKIE` and
/// `V2_COMPRESSED_COOKIE`, which it does not export).
const V2: u32 = 0x1c84_9313;
const V2_DEFLATE: u32 = 0x1c84_9314;
/// Cookie, payload length, normalizing offset, digits, lowest, highest, integer-to-double ratio.
const HEADER: usize = 40;
/// Longest encoded counter: a LEB128-64b9B varint takes at most 9 bytes.
const MAX_VARINT: usize = 9;
/// Longest inflated histogram: a header and every counter in its longest form.
const MAX_INFLATED: u64 = HEADER as u64 + MAX_COUNTERS * MAX_VARINT as u64;

/// Returns the histogram's plain V2 bytes (inflated if compressed), or what is wrong with them.
/// Another cookie is passed through for the deserializer to name.
pub(crate) fn checked(bytes: &[u8]) -> Result<Cow<'_, [u8]>, String> {
    match be_u32(bytes, 0) {
        Some(V2) => check_plain(bytes).map(|()| Cow::Borrowed(bytes)),
        Some(V2_DEFLATE) => {
            let declared = be_u32(bytes, 4).ok_or("compressed header is shorter than 8 bytes")?;
            let present = bytes.len() - 8;
            if declared as usize > present {
                return Err(format!(
                    "compressed length is {declared} bytes but {present} follow the header"
                ));
            }
            let mut plain = Vec::new();
            ZlibDecoder::new(&bytes[8..8 + declared as usize])
                .take(MAX_INFLATED + 1)
                .read_to_end(&mut plain)
                .map_err(|e| format!("compressed data does not inflate: {e}"))?;
            if plain.len() as u64 > MAX_INFLATED {
                return Err(format!(
                    "inflates past {MAX_INFLATED} bytes (allowed: {MAX_COUNTERS} counters)"
                ));
            }
            check_plain(&plain)?;
            Ok(Cow::Owned(plain))
        }
        _ => Ok(Cow::Borrowed(bytes)),
    }
}

/// Checks a plain V2 histogram: its header, its bounds and every encoded counter.
fn check_plain(b: &[u8]) -> Result<(), String> {
    if b.len() < HEADER {
        return Err(format!("header is {} bytes, {HEADER} expected", b.len()));
    }
    let word = |at| be_u32(b, at).expect("inside the header");
    let long = |at| be_u64(b, at).expect("inside the header");
    if word(0) != V2 {
        return Err(format!("inner cookie is {:#x}, {V2:#x} expected", word(0)));
    }
    let declared = word(4) as usize;
    let present = b.len() - HEADER;
    if declared > present {
        return Err(format!(
            "payload length is {declared} bytes but {present} follow the header"
        ));
    }
    let (digits, low, high) = (word(12), long(16), long(24));
    let counters = counters_for(low, high, digits)?;
    if counters > MAX_COUNTERS {
        return Err(format!(
            "bounds {low}..{high} with {digits} digits need {counters} counters \
             (allowed: {MAX_COUNTERS})"
        ));
    }
    check_counts(&b[HEADER..HEADER + declared])
}

/// Counters `Histogram::new_with_bounds(low, high, digits)` allocates (its own arithmetic), or
/// why it would refuse the bounds.
pub(crate) fn counters_for(low: u64, high: u64, digits: u32) -> Result<u64, String> {
    if digits > 5 {
        return Err(format!("{digits} significant digits (allowed: 0 to 5)"));
    }
    if !(1..=u64::MAX / 2).contains(&low) || high < 2 * low {
        return Err(format!(
            "bounds {low}..{high} (allowed: lowest 1 or more, highest at least twice that)"
        ));
    }
    let unit_magnitude = 63 - low.leading_zeros();
    // The smallest power of two at or above 2 × 10^digits, so 1 to 18.
    let sub_bucket_magnitude = (2 * 10u64.pow(digits)).next_power_of_two().trailing_zeros();
    if unit_magnitude + sub_bucket_magnitude > 63 {
        return Err(format!(
            "lowest {low} leaves no room for {digits} digits in 64 bits"
        ));
    }
    let mut untrackable = 1u64 << (unit_magnitude + sub_bucket_magnitude);
    let mut buckets = 1u64;
    while untrackable <= high {
        if untrackable > u64::MAX / 2 {
            buckets += 1;
            break;
        }
        untrackable <<= 1;
        buckets += 1;
    }
    Ok((buckets + 1) << (sub_bucket_magnitude - 1))
}

/// Walks the zig-zag varint counts: a zero run of `i64::MIN` cannot be negated, and counts
/// whose sum passes `u64` cannot be totalled.
fn check_counts(mut payload: &[u8]) -> Result<(), String> {
    let mut total = 0u64;
    while !payload.is_empty() {
        let (zz, used) = varint(payload).ok_or("the last count is cut off")?;
        payload = &payload[used..];
        let n = ((zz >> 1) as i64) ^ -((zz & 1) as i64);
        if n == i64::MIN {
            return Err("a run of zeros of length -i64::MIN (not a number)".to_owned());
        }
        if n > 0 {
            total = total
                .checked_add(n as u64)
                .ok_or("counts add up to more than 2^64")?;
        }
    }
    Ok(())
}

/// One LEB128-64b9B varint (HdrHistogram's: up to 8 bytes of 7 bits, then a whole 9th byte)
/// and the bytes it took; `None` when the bytes end inside it.
fn varint(b: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for i in 0..MAX_VARINT {
        let byte = *b.get(i)?;
        if i == MAX_VARINT - 1 {
            return Some((value | u64::from(byte) << 56, MAX_VARINT));
        }
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    unreachable!("the 9th byte returns")
}

fn be_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn be_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::{Serializer, V2DeflateSerializer, V2Serializer};
    use hdrhistogram::Histogram;

    #[test]
    fn counters_match_what_hdrhistogram_allocates() {
        for (low, high, digits) in [
            (1, 100_000_000, 3),
            (1, 10_000_000_000, 3),
            (1, 2, 1),
            (1000, u64::MAX, 5),
            (7, 1 << 40, 0),
            (1 << 40, u64::MAX, 2),
        ] {
            let h = Histogram::<u64>::new_with_bounds(low, high, digits as u8).unwrap();
            assert_eq!(
                counters_for(low, high, digits).unwrap(),
                h.distinct_values() as u64,
                "{low}..{high} at {digits}"
            );
        }
    }

    #[test]
    fn real_histograms_pass_plain_and_compressed() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3).unwrap();
        for v in [1, 5, 5, 1000, 123_456_789] {
            h.record(v).unwrap();
        }
        let mut plain = Vec::new();
        V2Serializer::new().serialize(&h, &mut plain).unwrap();
        assert!(matches!(checked(&plain), Ok(Cow::Borrowed(_))));
        let mut packed = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&h, &mut packed)
            .unwrap();
        assert_eq!(checked(&packed).unwrap().as_ref(), &plain[..]);
    }

    #[test]
    fn a_varint_takes_a_whole_ninth_byte() {
        assert_eq!(varint(&[0x05]), Some((5, 1)));
        assert_eq!(varint(&[0x80, 0x01]), Some((128, 2)));
        assert_eq!(varint(&[0xff; 9]), Some((u64::MAX, 9)));
        assert_eq!(varint(&[0xff; 3]), None);
    }
}
