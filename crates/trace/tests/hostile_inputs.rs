//! Property tests of tracefs format parsing and raw record decoding on input the kernel did
//! not write: the real `format` files of the events the tracer uses (tests/fixtures/formats,
//! from Linux 6.18 on x86_64) truncated, bit-flipped or with a number replaced by an extreme
//! one, and records of any bytes decoded by what those files describe. The property: a value,
//! or an error quoting the line; a record decodes or is skipped; never a panic, never an
//! allocation past the capped heap. Runs on the test threads.

use cap::Cap;
use proptest::prelude::*;
use std::alloc::System;
use std::path::Path;
use std::sync::OnceLock;
use xrunlab_trace::decode::Decoder;
use xrunlab_trace::format::{EventFormat, FormatError, MAX_RECORD_BYTES};

#[global_allocator]
static HEAP: Cap<System> = Cap::new(System, 256 << 20);

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 3_000,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// The real format files' text (read once).
fn formats() -> &'static [String] {
    static ONCE: OnceLock<Vec<String>> = OnceLock::new();
    ONCE.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/formats");
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        names.sort();
        let texts: Vec<String> = names
            .iter()
            .map(|p| std::fs::read_to_string(p).unwrap())
            .collect();
        assert!(texts.len() >= 10, "fixtures missing in {}", dir.display());
        texts
    })
}

fn parsed() -> Vec<EventFormat> {
    formats()
        .iter()
        .map(|t| EventFormat::parse(t).unwrap())
        .collect()
}

/// Damage to one format file.
#[derive(Debug, Clone)]
enum Damage {
    Cut(prop::sample::Index),
    Flip(prop::sample::Index, u8),
    /// The n-th run of digits replaced by this text.
    Number(prop::sample::Index, String),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        any::<prop::sample::Index>().prop_map(Damage::Cut),
        (any::<prop::sample::Index>(), 0u8..8).prop_map(|(i, b)| Damage::Flip(i, b)),
        (
            any::<prop::sample::Index>(),
            prop_oneof![
                Just("18446744073709551615".to_owned()),
                Just("65535".to_owned()),
                Just("65536".to_owned()),
                Just("4294967295".to_owned()),
                Just("-1".to_owned()),
                Just(String::new()),
                "[0-9a-z;:\\[\\] ]{0,10}",
            ],
        )
            .prop_map(|(i, s)| Damage::Number(i, s)),
    ]
}

fn damaged(text: &str, d: &Damage) -> String {
    let mut bytes = text.as_bytes().to_vec();
    match d {
        Damage::Cut(at) => bytes.truncate(at.index(bytes.len() + 1)),
        Damage::Flip(at, bit) => {
            let i = at.index(bytes.len());
            bytes[i] ^= 1 << bit;
        }
        Damage::Number(which, with) => {
            let b = text.as_bytes();
            let starts: Vec<usize> = (0..b.len())
                .filter(|&i| b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_digit()))
                .collect();
            if !starts.is_empty() {
                let start = *which.get(&starts);
                let end = (start..b.len())
                    .find(|&i| !b[i].is_ascii_digit())
                    .unwrap_or(b.len());
                return format!("{}{with}{}", &text[..start], &text[end..]);
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A record: `common_type` set to one of the events' ids, then any bytes.
fn record() -> impl Strategy<Value = (prop::sample::Index, Vec<u8>)> {
    (
        any::<prop::sample::Index>(),
        prop::collection::vec(any::<u8>(), 0..160),
    )
}

fn with_type(id: u16, mut raw: Vec<u8>) -> Vec<u8> {
    if raw.len() >= 2 {
        raw[..2].copy_from_slice(&id.to_ne_bytes());
    }
    raw
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn damaged_format_files_parse_or_quote_the_line(file in any::<prop::sample::Index>(), d in damage()) {
        let text = damaged(file.get::<String>(formats()), &d);
        match EventFormat::parse(&text) {
            Ok(f) => {
                for field in f.fields.values() {
                    prop_assert!(field.offset <= MAX_RECORD_BYTES && field.size <= MAX_RECORD_BYTES, "{:?}", field);
                }
            }
            Err(FormatError::FieldLine { what, line }) => {
                prop_assert!(text.contains(line.as_str()), "{} quotes {:?}", what, line);
            }
            Err(FormatError::Id { line }) => prop_assert!(text.contains(line.as_str())),
            Err(e) => prop_assert!(matches!(e, FormatError::MissingLine(_)), "{:?}", e),
        }
    }

    #[test]
    fn any_record_decodes_or_is_skipped(which in any::<prop::sample::Index>(), (_, raw) in record(), ts in any::<u64>(), cpu in any::<u16>()) {
        let formats = parsed();
        let mut decoder = Decoder::new(&formats).unwrap();
        let id = which.get(&formats).id;
        let raw = with_type(id, raw);
        if let Some(e) = decoder.decode(&raw, ts, cpu) {
            prop_assert_eq!((e.ts_ns, e.cpu), (ts, cpu));
        }
    }

    #[test]
    fn records_decode_or_are_skipped_under_damaged_formats(
        file in any::<prop::sample::Index>(),
        d in damage(),
        records in prop::collection::vec(record(), 1..8),
    ) {
        let mut texts: Vec<String> = formats().to_vec();
        let i = file.index(texts.len());
        texts[i] = damaged(&texts[i], &d);
        let Ok(formats) = texts.iter().map(|t| EventFormat::parse(t)).collect::<Result<Vec<_>, _>>() else {
            return Ok(());
        };
        // A known event lacking a field it needs is an error naming both.
        let mut decoder = match Decoder::new(&formats) {
            Ok(d) => d,
            Err(e) => {
                prop_assert!(matches!(e, FormatError::NoField { .. }), "{:?}", e);
                return Ok(());
            }
        };
        for (which, raw) in records {
            let raw = with_type(which.get(&formats).id, raw);
            let _ = decoder.decode(&raw, 1, 0);
        }
    }
}

#[test]
fn the_real_formats_decode_a_record_of_each_event() {
    let formats = parsed();
    let mut decoder = Decoder::new(&formats).unwrap();
    let mut decoded = 0;
    for f in &formats {
        // A record long enough for every fixed field, with data_loc strings left empty.
        let raw = with_type(f.id, vec![0u8; 128]);
        decoded += usize::from(decoder.decode(&raw, 1, 0).is_some());
    }
    assert!(
        decoded >= 10,
        "{decoded} of {} events decoded",
        formats.len()
    );
}
