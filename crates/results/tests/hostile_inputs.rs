//! Property tests of every result reader and of the histogram decoder on input they did not
//! write: the real result files in tests/fixtures (see its README), truncated, bit-flipped,
//! with any node replaced by a hostile JSON value, and random text; histograms from those files
//! damaged byte by byte and field by field. The property: a value, or an error naming the file
//! and the field; never a panic, never an allocation past the capped heap, never a hang (each
//! case is small and the whole property runs in seconds). Runs on the test threads.

use base64::Engine as _;
use cap::Cap;
use hdrhistogram::serialization::{Serializer as _, V2Serializer};
use hdrhistogram::Histogram;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::alloc::System;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use xrunlab_engine::{Distribution, Scale};
use xrunlab_results::histogram::merged;
use xrunlab_results::read::parse_typed;
use xrunlab_results::{EncodedHistogram, ReadError};

/// The heap of this test binary: a decoder that sizes a buffer from a forged header (4 GiB
/// for a 40-byte histogram) fails to allocate, which aborts the test binary, instead of
/// passing on a machine with the memory to spare.
#[global_allocator]
static HEAP: Cap<System> = Cap::new(System, 512 << 20);

/// Cases per property: thousands, within a few seconds in a debug build.
const CASES: u32 = 2_000;

/// The real result files, by name, with their text (read once).
fn fixtures() -> &'static [(PathBuf, String)] {
    static ONCE: OnceLock<Vec<(PathBuf, String)>> = OnceLock::new();
    ONCE.get_or_init(read_fixtures)
}

fn read_fixtures() -> Vec<(PathBuf, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut out: Vec<(PathBuf, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect();
    out.sort();
    assert!(out.len() >= 5, "fixtures missing in {}", dir.display());
    out
}

/// Which reader a file is for, from its original (undamaged) schema and kind.
#[derive(Debug, Clone, Copy)]
enum Reader {
    Run,
    Compare,
    Experiment,
    Wakeup,
    ExplainCost,
    Bench,
    BenchWatch,
    Watch,
    Doctor,
    Soak,
}

fn reader_of(text: &str) -> Reader {
    use xrunlab_results::*;
    let v: Value = serde_json::from_str(text).unwrap();
    let schema = v["schema"].as_str().unwrap_or_default();
    let kind = v["kind"].as_str().unwrap_or_default();
    match (schema, kind) {
        (run::SCHEMA, _) => Reader::Run,
        (compare::SCHEMA, _) => Reader::Compare,
        (lab::SCHEMA, wakeup::KIND) => Reader::Wakeup,
        (lab::SCHEMA, explain_cost::KIND) => Reader::ExplainCost,
        (lab::SCHEMA, _) => Reader::Experiment,
        (bench::SCHEMA, _) => Reader::Bench,
        (bench_watch::SCHEMA, _) => Reader::BenchWatch,
        (watch::SCHEMA, _) => Reader::Watch,
        (doctor::SCHEMA, _) => Reader::Doctor,
        (soak::SCHEMA, _) => Reader::Soak,
        other => panic!("no reader for a fixture of {other:?}"),
    }
}

/// No histograms to decode (the reader's value itself is the point).
fn none<T>(_: T) -> Vec<EncodedHistogram> {
    Vec::new()
}

/// Reads `text` with `reader`; a run's histograms come back to be decoded too.
fn read(reader: Reader, path: &Path, text: &str) -> Result<Vec<EncodedHistogram>, ReadError> {
    use xrunlab_results::*;
    match reader {
        Reader::Run => parse_typed::<run::RunFile>(path, text, run::SCHEMA).map(|r| {
            let h = r.histograms;
            vec![
                h.load_pct,
                h.driver_wake_latency_us,
                h.worker_wake_latency_us,
            ]
        }),
        Reader::Compare => {
            parse_typed::<compare::CompareResult>(path, text, compare::SCHEMA).map(|r| {
                r.distributions
                    .into_iter()
                    .flat_map(|d| [d.a, d.b])
                    .collect()
            })
        }
        Reader::Experiment => experiment::parse_experiment(path, text).map(none),
        Reader::Wakeup => wakeup::parse_wakeup(path, text)
            .map(|w| w.result.threads.into_iter().map(|t| t.latency_us).collect()),
        Reader::ExplainCost => explain_cost::parse_explain_cost(path, text).map(none),
        Reader::Bench => bench::parse_bench(path, text).map(none),
        Reader::BenchWatch => bench_watch::parse_bench_watch(path, text).map(none),
        Reader::Watch => watch::parse_watch(path, text).map(none),
        Reader::Doctor => parse_typed::<doctor::DoctorResult>(path, text, doctor::SCHEMA).map(none),
        Reader::Soak => parse_typed::<soak::SoakResult>(path, text, soak::SCHEMA).map(none),
    }
}

/// The property for one text: a value whose histograms decode or say why, or an error that
/// names the file and a field.
fn holds(reader: Reader, path: &Path, text: &str) -> Result<(), TestCaseError> {
    match read(reader, path, text) {
        Ok(histograms) => {
            for h in &histograms {
                use_histogram(h)?;
            }
        }
        Err(e) => {
            prop_assert!(!e.field.is_empty(), "{e}");
            prop_assert!(!e.problem.is_empty(), "{e}");
            prop_assert_eq!(&e.file, path);
            let named = format!("field {}", e.field);
            prop_assert!(e.to_string().contains(&named), "{}", e);
        }
    }
    Ok(())
}

/// Decodes a histogram and uses it as compare and report do: an error must say what is wrong.
fn use_histogram(e: &EncodedHistogram) -> Result<(), TestCaseError> {
    match e.decode() {
        Ok(h) => {
            let _ = h.value_at_quantile(0.99);
            let _ = e
                .ccdf()
                .map_err(|e| TestCaseError::fail(format!("decoded, then {e}")))?;
            let engine = Distribution::new(Scale::Micros);
            // Other bounds re-scale into one, or refuse; never a panic.
            if let Err(err) = merged([&h, engine.histogram(), &h]) {
                prop_assert!(
                    err.to_string().starts_with("histograms do not add"),
                    "{}",
                    err
                );
            }
        }
        Err(err) => prop_assert!(!err.to_string().is_empty()),
    }
    Ok(())
}

/// Every node's JSON pointer (the root's is "").
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                pointers(
                    child,
                    format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                    out,
                );
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                pointers(child, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
    out.push(at);
}

/// JSON values a forged file may hold where a field is expected.
fn hostile_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop_oneof![
            Just(u64::MAX),
            Just(1_000_000_000_000),
            Just(0),
            Just(u64::from(u32::MAX) + 1)
        ]
        .prop_map(Value::from),
        Just(json!(i64::MIN)),
        prop_oneof![
            Just(1e308),
            Just(-1e308),
            Just(-0.0),
            Just(5e-324),
            Just(-1.0)
        ]
        .prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        ".{0,24}".prop_map(Value::from),
        Just(json!([])),
        Just(json!({})),
        Just(json!([null, 1, "x"])),
        Just(Value::from(
            "HISTE/////8AAAAAAAAAAQAAAAAAAAABAAAAAAAAAAI/8AAAAAAAAA=="
        )),
        Just(Value::from(
            "HISTEwAAAAAAAAAAAAAAAQAAAAAAAAABAAAAAAAAAAI/8AAAAAAAAA=="
        )),
    ]
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: CASES,
        // Failures are kept as the fixtures' regressions, not in a file beside the test.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn truncated_files_read_or_name_the_field(file in any::<prop::sample::Index>(), cut in any::<prop::sample::Index>()) {
        let (path, text) = file.get(fixtures());
        let bytes = &text.as_bytes()[..cut.index(text.len() + 1)];
        holds(reader_of(text), path, &String::from_utf8_lossy(bytes))?;
    }

    #[test]
    fn bit_flipped_files_read_or_name_the_field(
        file in any::<prop::sample::Index>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 0u8..8), 1..4),
    ) {
        let (path, text) = file.get(fixtures());
        let mut bytes = text.clone().into_bytes();
        for (at, bit) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= 1 << bit;
        }
        holds(reader_of(text), path, &String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn files_with_a_node_replaced_read_or_name_the_field(
        file in any::<prop::sample::Index>(),
        nodes in prop::collection::vec((any::<prop::sample::Index>(), hostile_value()), 1..3),
    ) {
        let (path, text) = file.get(fixtures());
        let mut v: Value = serde_json::from_str(text).unwrap();
        for (node, with) in nodes {
            let mut at = Vec::new();
            pointers(&v, String::new(), &mut at);
            let p = node.get(&at).clone();
            *v.pointer_mut(&p).expect("a pointer just listed") = with;
        }
        holds(reader_of(text), path, &v.to_string())?;
    }

    #[test]
    fn random_text_is_refused_naming_the_file(text in ".{0,200}", reader in 0usize..10) {
        let readers = [
            Reader::Run, Reader::Compare, Reader::Experiment, Reader::Wakeup,
            Reader::ExplainCost, Reader::Bench, Reader::BenchWatch, Reader::Watch,
            Reader::Doctor, Reader::Soak,
        ];
        let path = Path::new("random.json");
        prop_assert!(read(readers[reader], path, &text).is_err());
        holds(readers[reader], path, &text)?;
    }
}

/// The histograms of the run fixtures as plain V2 bytes: the compressed ones inflate into the
/// same bytes, and damage to plain bytes reaches the counts rather than only the checksum.
fn plain_histograms() -> &'static [Vec<u8>] {
    static ONCE: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    ONCE.get_or_init(serialize_plain)
}

fn serialize_plain() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (path, text) in fixtures() {
        if let Reader::Run = reader_of(text) {
            for e in read(Reader::Run, path, text).unwrap() {
                let h: Histogram<u64> = e.decode().unwrap();
                let mut bytes = Vec::new();
                V2Serializer::new().serialize(&h, &mut bytes).unwrap();
                out.push(bytes);
            }
        }
    }
    assert!(!out.is_empty(), "no run fixture");
    out
}

fn encoded(bytes: &[u8]) -> EncodedHistogram {
    EncodedHistogram {
        data: base64::engine::general_purpose::STANDARD.encode(bytes),
        ..EncodedHistogram::encode(&Distribution::new(Scale::Micros))
    }
}

/// Header fields of a V2 histogram: (offset, width in bytes).
const HEADER_FIELDS: [(usize, usize); 7] =
    [(0, 4), (4, 4), (8, 4), (12, 4), (16, 8), (24, 8), (32, 8)];

proptest! {
    #![proptest_config(config())]

    #[test]
    fn damaged_histograms_decode_or_say_what_is_wrong(
        which in any::<prop::sample::Index>(),
        header in prop::collection::vec((0usize..7, any::<u64>()), 0..3),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 0u8..8), 0..4),
        cut in any::<prop::sample::Index>(),
        compress in any::<bool>(),
    ) {
        let mut bytes = which.get(plain_histograms()).clone();
        for (field, value) in header {
            let (at, width) = HEADER_FIELDS[field];
            bytes[at..at + width].copy_from_slice(&value.to_be_bytes()[8 - width..]);
        }
        for (at, bit) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= 1 << bit;
        }
        bytes.truncate(cut.index(bytes.len() + 1).max(bytes.len() / 2));
        if compress {
            // Wrap the damaged plain bytes as the compressed form, with a correct length.
            use std::io::Write as _;
            let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            z.write_all(&bytes).unwrap();
            let packed = z.finish().unwrap();
            let mut wrapped = 0x1c84_9314u32.to_be_bytes().to_vec();
            wrapped.extend_from_slice(&(packed.len() as u32).to_be_bytes());
            wrapped.extend_from_slice(&packed);
            bytes = wrapped;
        }
        use_histogram(&encoded(&bytes))?;
    }

    #[test]
    fn random_histogram_bytes_decode_or_say_what_is_wrong(
        cookie in prop_oneof![Just(0x1c84_9313u32), Just(0x1c84_9314), any::<u32>()],
        rest in prop::collection::vec(any::<u8>(), 0..120),
    ) {
        let mut bytes = cookie.to_be_bytes().to_vec();
        bytes.extend_from_slice(&rest);
        use_histogram(&encoded(&bytes))?;
    }

    #[test]
    fn random_histogram_text_decodes_or_says_what_is_wrong(data in "[A-Za-z0-9+/=]{0,120}|.{0,60}") {
        use_histogram(&EncodedHistogram { data, ..encoded(&[]) })?;
    }
}
