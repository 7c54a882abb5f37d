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
        Deserializer::new()
            .deserialize(&mut bytes.as_slice())
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
            out.push([x, (total - below) as f64 / total as f64]);
            below += v.count_at_value();
        }
        Ok(out)
    }
}

/// The sum of histograms (`Ok(None)` for none); `Err` says why one does not fit the first's
/// bounds (never for histograms of one [`Scale`]: they have the same bounds).
pub fn merged<'a>(
    hs: impl IntoIterator<Item = &'a Histogram<u64>>,
) -> Result<Option<Histogram<u64>>, HistogramError> {
    let mut it = hs.into_iter();
    let Some(first) = it.next() else {
        return Ok(None);
    };
    let mut out = first.clone();
    for h in it {
        out.add(h).map_err(HistogramError::Add)?;
    }
    Ok(Some(out))
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

        let small = Histogram::<u64>::new_with_bounds(1, 10, 1).unwrap();
        let mut big = Histogram::<u64>::new_with_bounds(1, 1_000_000, 1).unwrap();
        big.record(1_000_000).unwrap();
        let e = merged([&small, &big]).unwrap_err();
        assert!(e.to_string().starts_with("histograms do not add: "), "{e}");
        assert!(e.source().unwrap().is::<AdditionError>());
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
}
