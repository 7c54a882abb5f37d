//! The pod parser on golden pods: recorded from real PipeWire 0.3.65 (Debian 12's) and 1.4.2
//! (bookworm-backports, unpacked under target/pw-1.4) servers here, and built with libspa's
//! serializer in each documented layout; plus random and damaged pods, which must give an error
//! and never a panic; and random records written by libspa's serializer, which must read back
//! field for field (the parser reads pods in place, not through libspa). Runs on the test thread.

use pipewire::spa::pod::serialize::PodSerializer;
use pipewire::spa::pod::{Object, Property, PropertyFlags, Value};
use pipewire::spa::utils::Fraction;
use proptest::prelude::*;
use std::io::Cursor;
use xrunlab_pipewire::record::{
    KEY_CLOCK, KEY_DRIVER_BLOCK, KEY_FOLLOWER_BLOCK, KEY_INFO, OBJECT_PROFILER,
};
use xrunlab_pipewire::{parse_profile, Block, Clock, Info, PodError, ProfilerRecord, Status};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn a_recorded_0_3_65_cycle_reads_as_the_server_ran_it() {
    let records = parse_profile(&fixture("pw-0.3.65-one-cycle.pod")).expect("parses");
    assert_eq!(records.len(), 1);
    let r = &records[0];
    assert_eq!(r.clock.duration, 256, "PIPEWIRE_QUANTUM=256/48000");
    assert_eq!(r.clock.rate, (1, 48000));
    assert_eq!(r.clock.xrun_duration, None, "0.3.65 has no xrun duration");
    assert_eq!(r.driver.name, "Dummy-Driver");
    assert_eq!(r.followers.len(), 1);
    let f = &r.followers[0];
    assert_eq!(f.name, "late", "the pw-jack client the recording ran");
    assert_eq!(f.status, Status::Finished);
    assert!(
        r.driver.signal <= f.signal && f.signal <= f.awake && f.awake <= f.finish,
        "{f:?}"
    );
    assert_eq!(f.xrun_count, None, "0.3.65 has no per-node xrun count");
    assert_eq!(f.is_async, None);
}

#[test]
fn a_recorded_0_3_65_batch_holds_the_late_followers_cycles() {
    let records = parse_profile(&fixture("pw-0.3.65-late-follower.pod")).expect("parses");
    assert!(records.len() > 20, "{} records", records.len());
    let counters: Vec<i64> = records.iter().map(|r| r.info.counter).collect();
    assert!(
        counters.windows(2).all(|w| w[1] == w[0] + 1),
        "consecutive cycles: {counters:?}"
    );
    // The client ran 8 ms every 20th cycle at a 5.3 ms quantum: those records catch it still
    // running when the next cycle started.
    let late: Vec<&ProfilerRecord> = records
        .iter()
        .filter(|r| r.followers.iter().any(|f| f.status == Status::Awake))
        .collect();
    assert!(
        !late.is_empty(),
        "no record shows the late follower still awake"
    );
    assert!(
        late.len() < records.len() / 4,
        "{} of {} records late",
        late.len(),
        records.len()
    );
}

#[test]
fn a_recorded_1_4_2_cycle_reads_by_the_1_4_layout() {
    let records = parse_profile(&fixture("pw-1.4.2-one-cycle.pod")).expect("parses");
    assert_eq!(records.len(), 1);
    let r = &records[0];
    assert_eq!(r.clock.duration, 256, "PIPEWIRE_QUANTUM=256/48000");
    assert_eq!(r.clock.rate, (1, 48000));
    // 1.1.81 and later: `Int transport_state, Int cycle, Long xrun_duration` after next_nsec.
    assert!(r.clock.transport_state.is_some(), "{:?}", r.clock);
    assert!(r.clock.cycle.is_some(), "{:?}", r.clock);
    assert!(r.clock.xrun_duration.is_some(), "{:?}", r.clock);
    assert!(
        r.clock.next_nsec > r.clock.nsec,
        "the next cycle is due after this one: {:?}",
        r.clock
    );
    assert_eq!(r.driver.name, "Dummy-Driver");
    assert_eq!(r.followers.len(), 1);
    let f = &r.followers[0];
    assert_eq!(f.name, "late", "the JACK client the recording ran");
    assert_eq!(f.status, Status::Finished);
    assert!(
        r.driver.signal <= f.signal && f.signal <= f.awake && f.awake <= f.finish,
        "{f:?}"
    );
    // The client had overrun before the recording began: its own count is on every record.
    assert!(f.xrun_count.is_some_and(|n| n >= 0), "{f:?}");
    // The async flag came later than 1.4.2, which ends the block at the xrun count.
    assert_eq!(f.is_async, None);
}

/// On 1.4.2 an overrun comes as two pods, each of two records: the cycle the follower is still
/// running in is written again when the next one starts, the driver `Triggered`, the follower
/// `Awake` and signalled one period later; then the follower finishes late and its own xrun
/// count rises by one. This is the shape watch's detector reads on 1.4.
#[test]
fn a_recorded_1_4_2_overrun_shows_the_follower_awake_at_the_next_signal_and_its_count_rising() {
    let a = parse_profile(&fixture("pw-1.4.2-overrun-a.pod")).expect("parses");
    let b = parse_profile(&fixture("pw-1.4.2-overrun-b.pod")).expect("parses");
    assert_eq!((a.len(), b.len()), (2, 2));
    let period_ns = 256 * 1_000_000_000 / 48_000;
    let still_running = &a[0];
    assert_eq!(still_running.driver.status, Status::Triggered);
    let f = &still_running.followers[0];
    assert_eq!(f.status, Status::Awake, "{f:?}");
    let signalled_after = f.signal - still_running.driver.signal;
    assert!(
        (period_ns * 9 / 10..period_ns * 11 / 10).contains(&signalled_after),
        "signalled one period ({period_ns} ns) after the driver's stamp, not {signalled_after}"
    );
    assert!(
        f.finish < f.signal,
        "its finish is the previous cycle's: {f:?}"
    );
    let before = f.xrun_count.expect("1.4 counts per node");
    let finished_late = &b[0];
    let g = &finished_late.followers[0];
    assert_eq!(g.status, Status::Finished, "{g:?}");
    // Its `signal` is already the next cycle's; `awake` is still the cycle it overran.
    assert!(g.signal > g.awake, "{g:?}");
    assert!(
        g.finish - g.awake > period_ns,
        "it worked past its period (8 ms every 20th cycle): {g:?}"
    );
    assert_eq!(
        g.xrun_count,
        Some(before + 1),
        "the server counted the overrun"
    );
    // Nothing else went wrong on the graph: the driver's own count stays.
    assert_eq!(finished_late.info.xrun_count, still_running.info.xrun_count);
}

/// watch's detector on the recorded 1.4.2 overrun: one xrun, of the client, whose cycle is the
/// one it overran (its window covers the work that ran long), not the cycle before it, which
/// 1.4 writes again with the follower's stamps already the next cycle's.
#[test]
fn watch_finds_the_recorded_1_4_2_overrun_in_the_cycle_the_client_ran_long() {
    let mut detector = xrunlab_watch::Detector::new();
    let mut cycles = xrunlab_pipewire::watch_source::Cycles::default();
    let mut xruns = Vec::new();
    for name in [
        "pw-1.4.2-overrun-before.pod",
        "pw-1.4.2-overrun-a.pod",
        "pw-1.4.2-overrun-b.pod",
        "pw-1.4.2-overrun-after.pod",
    ] {
        for r in parse_profile(&fixture(name)).expect("parses") {
            xruns.extend(detector.cycle(&cycles.next(&r)));
        }
    }
    assert_eq!(xruns.len(), 1, "{xruns:#?}");
    let x = &xruns[0];
    let node = x.node.as_ref().expect("a node's xrun");
    assert_eq!(node.name, "late");
    // The work that ran long: it woke 44 µs into its cycle and finished 8.06 ms later.
    let b = parse_profile(&fixture("pw-1.4.2-overrun-b.pod")).expect("parses");
    let work = &b[0].followers[0];
    let (woke, finished) = (work.awake as u64, work.finish as u64);
    assert!(
        x.cycle_start_ns <= woke && woke < x.deadline_ns,
        "the card's cycle [{}, {}) does not hold the overrun's start {woke}",
        x.cycle_start_ns,
        x.deadline_ns
    );
    assert!(finished > x.deadline_ns, "it ran past the cycle's deadline");
}

fn info(counter: i64, xruns: i32) -> Value {
    Value::Struct(vec![
        Value::Long(counter),
        Value::Float(0.1),
        Value::Float(0.2),
        Value::Float(0.3),
        Value::Int(xruns),
    ])
}

/// The clock's layout after `next_nsec`, by server version (spa/param/profiler.h of each).
#[derive(Clone, Copy)]
enum Layout {
    /// 0.3.65: nothing after `next_nsec`.
    V0_3,
    /// 1.0: `Int cycle, Long xrun`.
    V1_0,
    /// 1.1.81 and later (1.4.2): `Int transport_state, Int cycle, Long xrun`.
    V1_4,
    /// A later server that appends a field of its own: tolerated.
    Future,
}

fn clock(layout: Layout) -> Value {
    let mut v = vec![
        Value::Int(0),
        Value::Int(27),
        Value::String("clock.system.monotonic".into()),
        Value::Long(1_000_000_000),
        Value::Fraction(Fraction {
            num: 1,
            denom: 48000,
        }),
        Value::Long(48_000),
        Value::Long(256),
        Value::Long(0),
        Value::Double(1.0),
        Value::Long(1_005_333_333),
    ];
    match layout {
        Layout::V0_3 => {}
        Layout::V1_0 => v.extend([Value::Int(41), Value::Long(512)]),
        Layout::V1_4 => v.extend([Value::Int(1), Value::Int(41), Value::Long(512)]),
        Layout::Future => v.extend([
            Value::Int(1),
            Value::Int(41),
            Value::Long(512),
            Value::Double(0.5),
        ]),
    }
    Value::Struct(v)
}

fn block(
    id: i32,
    name: &str,
    base: i64,
    status: i32,
    xruns: Option<i32>,
    is_async: Option<bool>,
) -> Value {
    let mut v = vec![
        Value::Int(id),
        Value::String(name.into()),
        Value::Long(base - 5_333_333),
        Value::Long(base),
        Value::Long(base + 20_000),
        Value::Long(base + 90_000),
        Value::Int(status),
        Value::Fraction(Fraction {
            num: 256,
            denom: 48000,
        }),
    ];
    v.extend(xruns.map(Value::Int));
    v.extend(is_async.map(Value::Bool));
    Value::Struct(v)
}

fn object(props: Vec<(u32, Value)>) -> Value {
    Value::Object(Object {
        type_: OBJECT_PROFILER,
        id: 0,
        properties: props
            .into_iter()
            .map(|(key, value)| Property {
                key,
                flags: PropertyFlags::empty(),
                value,
            })
            .collect(),
    })
}

fn pod(value: &Value) -> Vec<u8> {
    PodSerializer::serialize(Cursor::new(Vec::new()), value)
        .expect("serializes")
        .0
        .into_inner()
}

/// A record laid out as 1.x servers send it: every trailing field present.
fn later_layout() -> Vec<u8> {
    layout(Layout::V1_4)
}

fn layout(clock_layout: Layout) -> Vec<u8> {
    pod(&Value::Struct(vec![object(vec![
        (KEY_INFO, info(7, 3)),
        (KEY_CLOCK, clock(clock_layout)),
        (
            KEY_DRIVER_BLOCK,
            block(27, "Dummy-Driver", 1_000_000_000, 3, Some(3), None),
        ),
        (
            KEY_FOLLOWER_BLOCK,
            block(31, "synth", 1_000_000_500, 2, Some(5), Some(false)),
        ),
        (
            KEY_FOLLOWER_BLOCK,
            block(32, "reverb", 1_000_001_000, 3, Some(0), Some(true)),
        ),
    ])]))
}

#[test]
fn each_versions_clock_reads_by_its_documented_fields() {
    let clock_of = |l| parse_profile(&layout(l)).expect("parses")[0].clock.clone();
    let c = clock_of(Layout::V0_3);
    assert_eq!(
        (c.transport_state, c.cycle, c.xrun_duration),
        (None, None, None)
    );
    let c = clock_of(Layout::V1_0);
    assert_eq!(
        (c.transport_state, c.cycle, c.xrun_duration),
        (None, Some(41), Some(512))
    );
    let c = clock_of(Layout::V1_4);
    assert_eq!(
        (c.transport_state, c.cycle, c.xrun_duration),
        (Some(1), Some(41), Some(512))
    );
    let c = clock_of(Layout::Future);
    assert_eq!(
        (c.transport_state, c.cycle, c.xrun_duration),
        (Some(1), Some(41), Some(512))
    );
    assert_eq!(c.next_nsec, 1_005_333_333);
}

#[test]
fn the_later_layout_reads_its_extra_fields() {
    let records = parse_profile(&later_layout()).expect("parses");
    let r = &records[0];
    assert_eq!(r.info.counter, 7);
    assert_eq!(r.info.xrun_count, 3);
    assert_eq!(r.clock.xrun_duration, Some(512));
    assert_eq!(r.clock.cycle, Some(41));
    assert_eq!(r.driver.xrun_count, Some(3));
    let names: Vec<&str> = r.followers.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["synth", "reverb"]);
    assert_eq!(r.followers[0].status, Status::Awake);
    assert_eq!(r.followers[0].xrun_count, Some(5));
    assert_eq!(r.followers[1].is_async, Some(true));
}

#[test]
fn a_record_without_a_clock_or_with_a_mistyped_field_is_an_error() {
    let no_clock = pod(&Value::Struct(vec![object(vec![
        (KEY_INFO, info(1, 0)),
        (KEY_DRIVER_BLOCK, block(27, "d", 10, 3, None, None)),
    ])]));
    assert_eq!(parse_profile(&no_clock), Err(PodError::Missing("clock")));
    let mistyped = pod(&Value::Struct(vec![object(vec![
        (KEY_INFO, Value::Struct(vec![Value::Int(1)])),
        (KEY_CLOCK, clock(Layout::V0_3)),
        (KEY_DRIVER_BLOCK, block(27, "d", 10, 3, None, None)),
    ])]));
    assert_eq!(parse_profile(&mistyped), Err(PodError::WrongType("info")));
    assert_eq!(
        parse_profile(&pod(&Value::Int(3))),
        Err(PodError::NotAStruct)
    );
}

#[test]
fn objects_of_other_types_are_skipped() {
    let other = Value::Object(Object {
        type_: OBJECT_PROFILER + 1,
        id: 0,
        properties: vec![],
    });
    assert_eq!(parse_profile(&pod(&Value::Struct(vec![other]))), Ok(vec![]));
}

/// A record's values as libspa's serializer writes them, for the round trip below.
fn record_value(r: &ProfilerRecord) -> Value {
    let info = Value::Struct(vec![
        Value::Long(r.info.counter),
        Value::Float(r.info.cpu_load[0]),
        Value::Float(r.info.cpu_load[1]),
        Value::Float(r.info.cpu_load[2]),
        Value::Int(r.info.xrun_count),
    ]);
    let c = &r.clock;
    let mut clock = vec![
        Value::Int(c.flags),
        Value::Int(c.id),
        Value::String(c.name.clone()),
        Value::Long(c.nsec),
        Value::Fraction(Fraction {
            num: c.rate.0,
            denom: c.rate.1,
        }),
        Value::Long(c.position),
        Value::Long(c.duration),
        Value::Long(c.delay),
        Value::Double(c.rate_diff),
        Value::Long(c.next_nsec),
    ];
    clock.extend(c.transport_state.map(Value::Int));
    clock.extend(c.cycle.map(Value::Int));
    clock.extend(c.xrun_duration.map(Value::Long));
    let block = |b: &Block| {
        let mut v = vec![
            Value::Int(b.id),
            Value::String(b.name.clone()),
            Value::Long(b.prev_signal),
            Value::Long(b.signal),
            Value::Long(b.awake),
            Value::Long(b.finish),
            Value::Int(match b.status {
                Status::NotTriggered => 0,
                Status::Triggered => 1,
                Status::Awake => 2,
                Status::Finished => 3,
                Status::Inactive => 4,
                Status::Other(o) => o,
            }),
            Value::Fraction(Fraction {
                num: b.latency.0,
                denom: b.latency.1,
            }),
        ];
        v.extend(b.xrun_count.map(Value::Int));
        v.extend(b.is_async.map(Value::Bool));
        Value::Struct(v)
    };
    let mut props = vec![
        (KEY_INFO, info),
        (KEY_CLOCK, Value::Struct(clock)),
        (KEY_DRIVER_BLOCK, block(&r.driver)),
    ];
    props.extend(r.followers.iter().map(|f| (KEY_FOLLOWER_BLOCK, block(f))));
    object(props)
}

fn any_block() -> impl Strategy<Value = Block> {
    (
        (any::<i32>(), "[a-zA-Z0-9 ._:-]{0,40}|\\PC{0,12}"),
        (any::<i64>(), any::<i64>(), any::<i64>(), any::<i64>()),
        (any::<i32>(), any::<(u32, u32)>()),
        // Every version's tail: none, the xrun count (0.3.72), and `async` after it (1.x).
        prop_oneof![
            Just((None, None)),
            any::<i32>().prop_map(|n| (Some(n), None)),
            any::<(i32, bool)>().prop_map(|(n, a)| (Some(n), Some(a))),
        ],
    )
        .prop_map(
            |((id, name), (prev_signal, signal, awake, finish), (status, latency), tail)| Block {
                id,
                name,
                prev_signal,
                signal,
                awake,
                finish,
                status: Status::from(status),
                latency,
                xrun_count: tail.0,
                is_async: tail.1,
            },
        )
}

fn any_record() -> impl Strategy<Value = ProfilerRecord> {
    (
        (any::<i64>(), any::<[f32; 3]>(), any::<i32>()),
        (
            any::<(i32, i32)>(),
            "[a-z.]{0,30}",
            any::<(i64, i64, i64, i64, i64)>(),
            any::<(u32, u32)>(),
            any::<f64>(),
        ),
        // The clock's tail in each version: 0.3, 1.0, 1.1.81 and later.
        prop_oneof![
            Just((None, None, None)),
            any::<(i32, i64)>().prop_map(|(c, x)| (None, Some(c), Some(x))),
            any::<(i32, i32, i64)>().prop_map(|(s, c, x)| (Some(s), Some(c), Some(x))),
        ],
        any_block(),
        proptest::collection::vec(any_block(), 0..6),
    )
        .prop_map(
            |(
                (counter, cpu_load, xrun_count),
                ((flags, id), name, t, rate, rate_diff),
                tail,
                driver,
                followers,
            )| {
                ProfilerRecord {
                    info: Info {
                        counter,
                        cpu_load,
                        xrun_count,
                    },
                    clock: Clock {
                        flags,
                        id,
                        name,
                        nsec: t.0,
                        rate,
                        position: t.1,
                        duration: t.2,
                        delay: t.3,
                        rate_diff,
                        next_nsec: t.4,
                        transport_state: tail.0,
                        cycle: tail.1,
                        xrun_duration: tail.2,
                    },
                    driver,
                    followers,
                }
            },
        )
}

/// Equal field for field, floats by their bits (a NaN load reads back as the same NaN).
fn same(a: &ProfilerRecord, b: &ProfilerRecord) -> bool {
    let bits = |r: &ProfilerRecord| {
        (
            r.info.cpu_load.map(f32::to_bits),
            r.clock.rate_diff.to_bits(),
        )
    };
    let mut a2 = a.clone();
    let mut b2 = b.clone();
    for r in [&mut a2, &mut b2] {
        r.info.cpu_load = [0.0; 3];
        r.clock.rate_diff = 0.0;
    }
    bits(a) == bits(b) && a2 == b2
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_records_written_by_libspa_read_back_field_for_field(
        records in proptest::collection::vec(any_record(), 1..4),
    ) {
        let bytes = pod(&Value::Struct(records.iter().map(record_value).collect()));
        let read = parse_profile(&bytes);
        prop_assert!(read.is_ok(), "{:?}", read);
        let read = read.unwrap_or_default();
        prop_assert_eq!(read.len(), records.len());
        for (r, w) in read.iter().zip(&records) {
            prop_assert!(same(r, w), "read {:?}\nwrote {:?}", r, w);
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = parse_profile(&bytes);
    }

    #[test]
    fn truncated_pods_are_errors(cut in 0usize..10_000) {
        for good in [
            fixture("pw-0.3.65-one-cycle.pod"),
            fixture("pw-1.4.2-one-cycle.pod"),
            fixture("pw-1.4.2-overrun-a.pod"),
            later_layout(),
        ] {
            let cut = cut % good.len();
            prop_assert!(parse_profile(&good[..cut]).is_err(), "a pod cut at {} parsed", cut);
        }
    }

    #[test]
    fn damaged_pods_never_panic(at in 0usize..10_000, byte in any::<u8>()) {
        for mut pod in [
            fixture("pw-0.3.65-one-cycle.pod"),
            fixture("pw-1.4.2-one-cycle.pod"),
            fixture("pw-1.4.2-overrun-a.pod"),
            later_layout(),
        ] {
            let at = at % pod.len();
            pod[at] = byte;
            let _ = parse_profile(&pod);
        }
    }
}

/// The pods of a file that holds several, one after another (each its 8-byte header and its body
/// padded to 8 bytes, as the profiler sends them).
fn pods(bytes: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while rest.len() >= 8 {
        let size = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
        let whole = (8 + size.div_ceil(8) * 8).min(rest.len());
        out.push(&rest[..whole]);
        rest = &rest[whole..];
    }
    out
}

/// watch on 1.4.2's Dummy-Driver held off its CPU by an RT hog (15 ms every 700 ms on the server
/// thread's CPU, 256 frames at 48 kHz; 18 consecutive pods recorded here). The profiler writes
/// the last cycle again with its clock two periods on, then the driver starts 15.3 ms after its
/// last start: 10 ms later than it was due, but only 4.76 ms after the clock's `nsec`, under the
/// 5.33 ms period. One xrun, rooted in the driver's late start, and its window reaches back to
/// when the driver was due, where the hog ran.
#[test]
fn watch_finds_the_recorded_1_4_2_driver_held_off_its_cpu_for_three_periods() {
    use xrunlab_watch::chain::{Finding, Role};
    let bytes = fixture("pw-1.4.2-starved-driver.pods");
    let records: Vec<ProfilerRecord> = pods(&bytes)
        .into_iter()
        .flat_map(|p| parse_profile(p).expect("parses"))
        .collect();
    let counters: Vec<i64> = records.iter().map(|r| r.info.counter).collect();
    assert_eq!(
        counters,
        (911..=931).collect::<Vec<_>>(),
        "consecutive records"
    );
    let start = |n: i64| {
        records
            .iter()
            .find(|r| r.info.counter == n)
            .map(|r| r.driver.signal as u64)
            .expect("recorded")
    };
    let (last_start, late_start) = (start(924), start(926));
    let period = 256 * 1_000_000_000 / 48_000;
    assert!(
        late_start - last_start > 2 * period,
        "the stall is in the recording"
    );
    let mut cycles = xrunlab_pipewire::watch_source::Cycles::default();
    let mut detector = xrunlab_watch::Detector::new();
    let xruns: Vec<_> = records
        .iter()
        .flat_map(|r| detector.cycle(&cycles.next(r)))
        .collect();
    assert_eq!(xruns.len(), 1, "{xruns:#?}");
    let x = &xruns[0];
    assert_eq!(x.cycle_start_ns, late_start, "{x:#?}");
    let root = x.path.last().expect("a path");
    assert_eq!(
        (root.role, root.finding),
        (Role::Driver, Finding::DriverLate),
        "{x:#?}"
    );
    assert_eq!(
        root.excess_ns,
        late_start - (last_start + period),
        "late against its last start plus a period: {x:#?}"
    );
    assert!(root.excess_ns >= period);
}
