//! A distribution kept whole in a result file: the HdrHistogram V2 compressed interchange
//! format (DEFLATE), base64-encoded, as the Java, JS and Rust HdrHistogram libraries read it,
//! with the unit its values are in. Encoded and decoded on the main thread.

use base64::Engine as _;
use hdrhistogram::errors::AdditionError;
use hdrhistogram::serialization::{
    DeserializeError, Deserializer, Serializer, V2DeflateSerializer,
};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use xrunlab_engine::{Distribution, Scale};

pub use crate::hdr_wire::MAX_COUNTERS;

/// The `encoding` every [`EncodedHistogram`] names.
pub const ENCODING: &str = "HdrHistogram V2 compressed, base64";

/// Unit names of the two [`Scale`]s.
pub const UNIT_PERCENT: &str = "percent";
/// See [`UNIT_PERCENT`].
pub const UNIT_MICROS: &str = "us";

/// Why a histogram's text cannot be used; the message says what is wrong and what was
/// expected, and the base64, HdrHistogram or addition error is the source.
#[derive(Debug, thiserror::Error)]
pub enum HistogramError {
    /// The `encoding` field names another format.
    #[error("encoding is {found:?}, not {:?}", ENCODING)]
    Encoding {
        /// The encoding the text names.
        found: String,
    },
    /// `data` is not base64 text.
    #[error("data is not base64: {0}")]
    Base64(#[source] base64::DecodeError),
    /// The bytes are not an HdrHistogram V2 compressed histogram (truncated, another format).
    #[error("data is not an HdrHistogram V2 histogram: {0}")]
    Format(#[source] DeserializeError),
    /// The bytes are an HdrHistogram, but one that cannot be decoded within bounded memory or
    /// without overflow: a length past the bytes present, bounds needing more than
    /// [`MAX_COUNTERS`] counters, a count that is cut off or cannot be negated or summed.
    #[error("data is not a usable HdrHistogram V2 histogram: {problem}")]
    Invalid {
        /// What is wrong, and what is allowed.
        problem: String,
    },
    /// The histogram is in other units than the reader expects.
    #[error(
        "histogram in {unit} × {units_per_value} per value, expected {expected_unit} × {expected_units_per_value}"
    )]
    Unit {
        /// The unit the text names.
        unit: String,
        /// Its counts per value.
        units_per_value: f64,
        /// The unit expected.
        expected_unit: &'static str,
        /// The counts per value expected.
        expected_units_per_value: f64,
    },
    /// Two histograms have bounds that do not fit each other.
    #[error("histograms do not add: {0}")]
    Add(#[source] AdditionError),
    /// Histograms whose bounds differ would need a sum larger than [`MAX_COUNTERS`] counters.
    #[error("histograms do not add: {problem}")]
    Bounds {
        /// The bounds asked for, and what is allowed.
        problem: String,
    },
}

/// One histogram as interchange text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EncodedHistogram {
    /// What one reported value is in: "percent" (of the buffer) or "us".
    pub unit: String,
    /// Histogram counts per reported unit: a value `v` was recorded as `round(v × this)`
    /// (1000 for both units: 0.001 % and 1 ns steps).
    pub units_per_value: f64,
    /// Always [`ENCODING`].
    pub encoding: String,
    /// The histogram, V2 compressed then base64 (standard alphabet, padded).
    pub data: String,
}

impl EncodedHistogram {
    /// Encodes a distribution's histogram.
    pub fn encode(d: &Distribution) -> EncodedHistogram {
        Self::of(d.histogram(), d.scale())
    }

    /// Encodes a histogram recorded in `scale`'s units.
    pub fn of(histogram: &Histogram<u64>, scale: Scale) -> EncodedHistogram {
        let mut bytes = Vec::new();
        // Serializing into a Vec cannot fail on I/O, and the histogram is a valid one.
        V2DeflateSerializer::new()
            .serialize(histogram, &mut bytes)
            .expect("an in-memory histogram serializes");
        EncodedHistogram {
            unit: unit_of(scale).to_owned(),
            units_per_value: scale.units_per_value(),
            encoding: ENCODING.to_owned(),
            data: base64::engine::general_purpose::STANDARD.encode(bytes),
        }
    }

    /// Decodes the histogram; `Err` says what is wrong with the text.
    pub fn decode(&self) -> Result<Histogram<u64>, HistogramError> {
        if self.encoding != ENCODING {
            return Err(HistogramError::Encoding {
                found: self.encoding.clone(),
            });
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(self.data.trim())
            .map_err(HistogramError::Base64)?;
        // Checked first: the deserializer trusts the lengths and bounds it reads.
        let plain = crate::hdr_wire::checked(&bytes)
            .map_err(|problem| HistogramError::Invalid { problem })?;
        Deserializer::new()
            .deserialize(&mut plain.as_ref())
            .map_err(HistogramError::Format)
    }

    /// Decodes the histogram after checking that it is in `unit` with `scale`'s steps;
    /// `Err` names what differs.
    pub fn decode_as(&self, scale: Scale) -> Result<Histogram<u64>, HistogramError> {
        let unit = unit_of(scale);
        if self.unit != unit || self.units_per_value != scale.units_per_value() {
            return Err(HistogramError::Unit {
                unit: self.unit.clone(),
                units_per_value: self.units_per_value,
                expected_unit: unit,
                expected_units_per_value: scale.units_per_value(),
            });
        }
        self.decode()
    }
    /// The complementary cumulative distribution, as cyclictest users plot it: per recorded
    /// bucket, `[x, fraction]` where `x` is the bucket's lowest value in this histogram's unit
    /// and `fraction` the share of samples at `x` or above (within the histogram's resolution,
    /// a value equal to `x` cannot be told from one just above it). Fractions fall from 1 to
    /// 1/count, never 0, so they fit a log axis. Empty for an empty histogram.
    pub fn ccdf(&self) -> Result<Vec<[f64; 2]>, HistogramError> {
        let h = self.decode()?;
        let total = h.len();
        let mut out = Vec::new();
        let mut below = 0u64;
        for v in h.iter_recorded() {
            let x = h.lowest_equivalent(v.value_iterated_to()) as f64 / self.units_per_value;
            // Decoded counts sum within u64 (checked), so neither saturates in practice.
            out.push([x, total.saturating_sub(below) as f64 / total as f64]);
            below = below.saturating_add(v.count_at_value());
        }
        Ok(out)
    }
}

/// The sum of histograms (`Ok(None)` for none). Histograms of one [`Scale`] have the same
/// bounds and add as they are; others (from another tool, or forged) are re-scaled into one
/// histogram spanning all their bounds at the finest precision among them, and `Err` says
/// when that would need more than [`MAX_COUNTERS`] counters.
pub fn merged<'a>(
    hs: impl IntoIterator<Item = &'a Histogram<u64>>,
) -> Result<Option<Histogram<u64>>, HistogramError> {
    let hs: Vec<&Histogram<u64>> = hs.into_iter().collect();
    let Some(first) = hs.first() else {
        return Ok(None);
    };
    let same = |h: &&Histogram<u64>| {
        (h.low(), h.high(), h.sigfig()) == (first.low(), first.high(), first.sigfig())
    };
    let (mut out, rest) = if hs.iter().all(same) {
        ((*first).clone(), &hs[1..])
    } else {
        (spanning(&hs)?, &hs[..])
    };
    for h in rest {
        out.add(*h).map_err(HistogramError::Add)?;
    }
    Ok(Some(out))
}

/// An empty histogram whose bounds and precision cover all of `hs` (their maxima included).
fn spanning(hs: &[&Histogram<u64>]) -> Result<Histogram<u64>, HistogramError> {
    let low = hs.iter().map(|h| h.low()).min().unwrap_or(1);
    let high = hs.iter().map(|h| h.high().max(h.max())).max().unwrap_or(2);
    let digits = hs.iter().map(|h| h.sigfig()).max().unwrap_or(0);
    let high = high.max(low.saturating_mul(2));
    let counters = crate::hdr_wire::counters_for(low, high, u32::from(digits))
        .map_err(|problem| HistogramError::Bounds { problem })?;
    if counters > MAX_COUNTERS {
        return Err(HistogramError::Bounds {
            problem: format!(
                "bounds {low}..{high} with {digits} digits together need {counters} counters \
                 (allowed: {MAX_COUNTERS})"
            ),
        });
    }
    Histogram::new_with_bounds(low, high, digits).map_err(|e| HistogramError::Bounds {
        problem: format!("bounds {low}..{high} with {digits} digits: {e:?}"),
    })
}

/// The unit name of a scale.
pub fn unit_of(scale: Scale) -> &'static str {
    match scale {
        Scale::Percent => UNIT_PERCENT,
        Scale::Micros => UNIT_MICROS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_counts_and_percentiles() {
        let mut d = Distribution::new(Scale::Micros);
        for i in 0..10_000u32 {
            d.record(f64::from(i % 997) * 1.7 + 3.0);
        }
        let e = EncodedHistogram::encode(&d);
        assert_eq!((e.unit.as_str(), e.units_per_value), ("us", 1000.0));
        let h = e.decode_as(Scale::Micros).unwrap();
        assert_eq!(h.len(), 10_000);
        for q in [0.5, 0.99, 0.999, 1.0] {
            assert_eq!(h.value_at_quantile(q), d.histogram().value_at_quantile(q));
        }
        let refused = e.decode_as(Scale::Percent).unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("histogram in us × 1000 per value, expected percent"),
            "{refused}"
        );
        let mut broken = e.clone();
        broken.data.truncate(broken.data.len() / 2);
        assert!(broken.decode().is_err());
    }

    #[test]
    fn decode_errors_name_what_is_wrong_and_keep_the_underlying_error_as_source() {
        use std::error::Error;
        let good = EncodedHistogram::encode(&Distribution::new(Scale::Micros));

        let mut other = good.clone();
        other.encoding = "json".into();
        let e = other.decode().unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("encoding is \"json\", not {ENCODING:?}")
        );
        assert!(e.source().is_none());

        let mut not_base64 = good.clone();
        not_base64.data = "!!!".into();
        let e = not_base64.decode().unwrap_err();
        assert!(matches!(e, HistogramError::Base64(_)));
        assert!(e.to_string().starts_with("data is not base64: "), "{e}");
        assert!(e.source().unwrap().is::<base64::DecodeError>());

        let mut not_hdr = good.clone();
        not_hdr.data = base64::engine::general_purpose::STANDARD.encode(b"not a histogram");
        let e = not_hdr.ccdf().unwrap_err();
        assert!(matches!(e, HistogramError::Format(_)));
        assert!(
            e.to_string()
                .starts_with("data is not an HdrHistogram V2 histogram: "),
            "{e}"
        );
        assert!(e.source().unwrap().is::<DeserializeError>());

        let e = good.decode_as(Scale::Percent).unwrap_err();
        assert!(matches!(
            e,
            HistogramError::Unit {
                expected_unit: UNIT_PERCENT,
                ..
            }
        ));

        let fine = Histogram::<u64>::new_with_bounds(1, 1 << 20, 5).unwrap();
        let wide = Histogram::<u64>::new_with_bounds(1, u64::MAX, 1).unwrap();
        let e = merged([&fine, &wide]).unwrap_err();
        assert!(e.to_string().starts_with("histograms do not add: "), "{e}");
        assert!(matches!(e, HistogramError::Bounds { .. }));
    }

    #[test]
    fn the_ccdf_falls_from_all_samples_to_the_last_one() {
        let mut d = Distribution::new(Scale::Micros);
        for v in [10.0, 10.0, 20.0, 40.0] {
            d.record(v);
        }
        let c = EncodedHistogram::encode(&d).ccdf().unwrap();
        assert_eq!(c, [[10.0, 1.0], [20.0, 0.5], [40.0, 0.25]]);
        let empty = EncodedHistogram::encode(&Distribution::new(Scale::Percent));
        assert!(empty.ccdf().unwrap().is_empty());
    }

    /// A plain V2 histogram (1..2^40 at 3 digits) whose counts are `payload`, base64-encoded.
    fn forged(payload: &[u8]) -> EncodedHistogram {
        let mut b = Vec::new();
        b.extend_from_slice(&0x1c84_9313u32.to_be_bytes());
        b.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        b.extend_from_slice(&0u32.to_be_bytes());
        b.extend_from_slice(&3u32.to_be_bytes());
        b.extend_from_slice(&1u64.to_be_bytes());
        b.extend_from_slice(&(1u64 << 40).to_be_bytes());
        b.extend_from_slice(&1.0f64.to_be_bytes());
        b.extend_from_slice(payload);
        EncodedHistogram {
            data: base64::engine::general_purpose::STANDARD.encode(b),
            ..EncodedHistogram::encode(&Distribution::new(Scale::Micros))
        }
    }

    fn invalid(e: &EncodedHistogram) -> String {
        match e.decode() {
            Err(HistogramError::Invalid { problem }) => problem,
            other => panic!("not refused as invalid: {other:?}"),
        }
    }

    #[test]
    fn a_40_byte_histogram_asking_for_4_gib_is_refused_before_anything_is_allocated() {
        let e = EncodedHistogram {
            data: "HISTE/////8AAAAAAAAAAQAAAAAAAAABAAAAAAAAAAI/8AAAAAAAAA==".into(),
            ..forged(&[])
        };
        assert_eq!(
            invalid(&e),
            "payload length is 4294967295 bytes but 0 follow the header"
        );
        assert!(e
            .decode()
            .unwrap_err()
            .to_string()
            .starts_with("data is not a usable HdrHistogram V2 histogram: payload length"));
    }

    #[test]
    fn bounds_that_need_more_counters_than_allowed_are_refused() {
        // 5 digits over all of u64: 6.3 million counters, 50 MB.
        let mut e = forged(&[]);
        let mut b = base64::engine::general_purpose::STANDARD
            .decode(&e.data)
            .unwrap();
        b[12..16].copy_from_slice(&5u32.to_be_bytes());
        b[24..32].copy_from_slice(&u64::MAX.to_be_bytes());
        e.data = base64::engine::general_purpose::STANDARD.encode(b);
        let p = invalid(&e);
        assert!(
            p.contains("with 5 digits need 6291456 counters (allowed: 1048576)"),
            "{p}"
        );
    }

    #[test]
    fn a_zero_run_of_i64_min_is_an_error_not_an_overflow() {
        // zig-zag u64::MAX is i64::MIN, which the deserializer would negate.
        assert_eq!(
            invalid(&forged(&[0xff; 9])),
            "a run of zeros of length -i64::MIN (not a number)"
        );
    }

    #[test]
    fn counts_that_sum_past_u64_are_an_error_not_an_overflow() {
        // Three counts of i64::MAX (zig-zag u64::MAX - 1).
        let max = [0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        assert!(forged(&max.repeat(2)).ccdf().is_ok());
        let e = forged(&max.repeat(3));
        assert_eq!(invalid(&e), "counts add up to more than 2^64");
        assert!(matches!(e.ccdf(), Err(HistogramError::Invalid { .. })));
    }

    #[test]
    fn a_cut_off_count_is_an_error() {
        assert_eq!(invalid(&forged(&[0x80])), "the last count is cut off");
    }

    #[test]
    fn histograms_with_other_bounds_are_rescaled_into_one_whatever_the_order() {
        // 1..2 at 1 digit, empty: the compare panic's input.
        let odd = EncodedHistogram {
            data: "HISTEwAAAAAAAAAAAAAAAQAAAAAAAAABAAAAAAAAAAI/8AAAAAAAAA==".into(),
            ..forged(&[])
        }
        .decode()
        .unwrap();
        let mut tiny = Histogram::<u64>::new_with_bounds(1, 2, 1).unwrap();
        tiny.record(2).unwrap();
        let mut d = Distribution::new(Scale::Micros);
        for v in [3.0, 250.0, 9_000_000.0] {
            d.record(v);
        }
        let engine = d.histogram();
        for order in [
            vec![&odd, engine, &tiny],
            vec![&tiny, &odd, engine],
            vec![engine, &tiny],
        ] {
            let sum = merged(order).unwrap().unwrap();
            assert_eq!(sum.len(), 4);
            assert_eq!(sum.max(), sum.highest_equivalent(9_000_000_000));
            assert_eq!(sum.min_nz(), 2);
        }
    }

    #[test]
    fn histograms_whose_union_needs_too_many_counters_do_not_add() {
        let fine = Histogram::<u64>::new_with_bounds(1, 1 << 20, 5).unwrap();
        let wide = Histogram::<u64>::new_with_bounds(1, u64::MAX, 1).unwrap();
        let e = merged([&fine, &wide]).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "histograms do not add: bounds 1..18446744073709551615 with 5 digits together need"
            ),
            "{e}"
        );
    }
}
