//! One profiler record per driver cycle, and the parser that reads it from the pod PipeWire's
//! profiler sends; a pure function, called on the profiler's main-loop thread (and by tests).
//!
//! The pod (spa/param/profiler.h): a Struct of `SPA_TYPE_OBJECT_Profiler` objects, one per
//! cycle, whose properties are `info`, `clock`, `driverBlock` and one `followerBlock` per
//! follower (1.x adds a `followerClock` after a follower that is itself a driver, which is
//! skipped), each a Struct of plain values. Fields are read by the documented field lists of
//! each version, and later servers append fields to these Structs:
//! - clock, up to `next_nsec` in every version; then nothing (0.3.65), `Int cycle, Long xrun`
//!   (1.0), or `Int transport_state, Int cycle, Long xrun` (1.1.81 and later, e.g. 1.4.2).
//!   The tail is told apart by its types, since the two later ones differ in their second field;
//! - a block: up to `latency` in every version; then `Int xrun_count` (0.3.72 and later) and
//!   `Bool async` (1.x).
//!
//! Anything past what is known is ignored; a missing optional field is `None`.
//!
//! The pod is read in place, field by field, once `check_framing` has checked that every
//! container is tiled exactly by its children and every value has its type's size. libspa's
//! `PodDeserializer` into `Value` did this before: it builds a tree with a `Vec` for each Struct
//! and a `String` for each name, every cycle, which was a fifth of watch's CPU on PipeWire 1.4.2
//! (`perf record` of `watch --no-kernel` beside a calm client at 128 frames: 375 records a
//! second). The pod layout it reads (spa/pod/pod.h): each value an 8-byte header (body size,
//! type) then its body, padded to 8 bytes inside containers. Tests build their pods with
//! libspa's own serializer.

use pipewire::spa::sys as spa_sys;
use std::fmt;

/// `SPA_TYPE_OBJECT_Profiler`.
pub const OBJECT_PROFILER: u32 = spa_sys::SPA_TYPE_OBJECT_Profiler;
/// `SPA_PROFILER_info`.
pub const KEY_INFO: u32 = spa_sys::SPA_PROFILER_info;
/// `SPA_PROFILER_clock`.
pub const KEY_CLOCK: u32 = spa_sys::SPA_PROFILER_clock;
/// `SPA_PROFILER_driverBlock`.
pub const KEY_DRIVER_BLOCK: u32 = spa_sys::SPA_PROFILER_driverBlock;
/// `SPA_PROFILER_followerBlock`.
pub const KEY_FOLLOWER_BLOCK: u32 = spa_sys::SPA_PROFILER_followerBlock;

/// A node's state when the record was written (`enum pw_node_activation_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Not triggered in this cycle (0).
    NotTriggered,
    /// Triggered, not yet running (1).
    Triggered,
    /// Running (2).
    Awake,
    /// Done (3).
    Finished,
    /// Not scheduled (4).
    Inactive,
    /// A value this code does not know.
    Other(i32),
}

impl From<i32> for Status {
    fn from(v: i32) -> Status {
        match v {
            0 => Status::NotTriggered,
            1 => Status::Triggered,
            2 => Status::Awake,
            3 => Status::Finished,
            4 => Status::Inactive,
            o => Status::Other(o),
        }
    }
}

/// `info`: the cycle counter, the server's CPU load averages and the driver's xrun count.
#[derive(Debug, Clone, PartialEq)]
pub struct Info {
    /// Cycle counter; a jump means records were dropped by the server's ring.
    pub counter: i64,
    /// CPU load over about 1, 8 and 32 cycles... as the server computes them (0..1).
    pub cpu_load: [f32; 3],
    /// The driver's xrun count so far.
    pub xrun_count: i32,
}

/// `clock`: the driver's clock for this cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct Clock {
    /// Clock flags.
    pub flags: i32,
    /// Clock id.
    pub id: i32,
    /// Clock name.
    pub name: String,
    /// Time of the cycle start, CLOCK_MONOTONIC ns.
    pub nsec: i64,
    /// Rate as a fraction (1/48000).
    pub rate: (u32, u32),
    /// Position in samples.
    pub position: i64,
    /// Cycle length in samples: the quantum.
    pub duration: i64,
    /// Delay in samples.
    pub delay: i64,
    /// Rate correction.
    pub rate_diff: f64,
    /// Expected start of the next cycle, CLOCK_MONOTONIC ns.
    pub next_nsec: i64,
    /// The transport state (1.1.81 and later).
    pub transport_state: Option<i32>,
    /// The driver's own cycle counter (1.x servers).
    pub cycle: Option<i32>,
    /// The clock's accumulated xrun time (1.x servers).
    pub xrun_duration: Option<i64>,
}

/// The timing of one node (the driver or a follower) in the cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    /// Node id (the registry's global id).
    pub id: i32,
    /// Node name.
    pub name: String,
    /// When it was signalled in the previous cycle, ns.
    pub prev_signal: i64,
    /// When it was signalled (triggered), CLOCK_MONOTONIC ns; 0 when not.
    pub signal: i64,
    /// When it woke up and started processing, ns; 0 when not.
    pub awake: i64,
    /// When it finished, ns; 0 when not.
    pub finish: i64,
    /// Its state when the record was written.
    pub status: Status,
    /// Its latency as a fraction (frames/rate).
    pub latency: (u32, u32),
    /// Its own xrun count (servers 0.3.72 and later).
    pub xrun_count: Option<i32>,
    /// Whether it runs asynchronously, one cycle behind (servers after 1.4; 1.4.2 sends none).
    pub is_async: Option<bool>,
}

/// One driver cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfilerRecord {
    /// Counter, load and the driver's xrun count.
    pub info: Info,
    /// The driver's clock.
    pub clock: Clock,
    /// The driver's own timing.
    pub driver: Block,
    /// Every follower's timing, in the server's order.
    pub followers: Vec<Block>,
}

/// Why a pod could not be read as profiler records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodError {
    /// libspa could not decode the bytes (truncated or garbled).
    Decode(String),
    /// The pod decoded, but is not a Struct of objects.
    NotAStruct,
    /// A profiler object lacks a property or a field the record needs.
    Missing(&'static str),
    /// A field has another type than the header gives.
    WrongType(&'static str),
}

impl fmt::Display for PodError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PodError::Decode(e) => write!(f, "the profiler pod does not decode: {e}"),
            PodError::NotAStruct => f.write_str("the profiler pod is not a Struct of objects"),
            PodError::Missing(what) => write!(f, "the profiler record has no {what}"),
            PodError::WrongType(what) => {
                write!(f, "the profiler record's {what} has an unexpected type")
            }
        }
    }
}

impl std::error::Error for PodError {}

/// One pod value inside bytes [`check_framing`] accepted: its type and its body.
#[derive(Clone, Copy)]
struct Pod<'a> {
    type_: u32,
    body: &'a [u8],
}

impl<'a> Pod<'a> {
    /// The pod at the start of `bytes`, and the bytes after it (its body padded to 8).
    fn split(bytes: &'a [u8]) -> Option<(Pod<'a>, &'a [u8])> {
        let size = u32_at(bytes, 0)? as usize;
        let type_ = u32_at(bytes, 4)?;
        let body = bytes.get(8..8 + size)?;
        let rest = bytes.get(8 + align8(size)..).unwrap_or(&[]);
        Some((Pod { type_, body }, rest))
    }

    /// The fields of a Struct, in order; `what` names it in errors.
    fn fields(self, what: &'static str) -> Result<Fields<'a>, PodError> {
        if self.type_ != spa_sys::SPA_TYPE_Struct {
            return Err(PodError::WrongType(what));
        }
        Ok(Fields {
            rest: self.body,
            what,
        })
    }

    fn bytes<const N: usize>(self, type_: u32) -> Option<[u8; N]> {
        (self.type_ == type_).then(|| self.body.try_into().ok())?
    }
}

/// The fields of one Struct property, read in order.
struct Fields<'a> {
    rest: &'a [u8],
    what: &'static str,
}

impl<'a> Fields<'a> {
    fn next(&mut self) -> Option<Pod<'a>> {
        let (pod, rest) = Pod::split(self.rest)?;
        self.rest = rest;
        Some(pod)
    }

    fn need(&mut self) -> Result<Pod<'a>, PodError> {
        self.next().ok_or(PodError::Missing(self.what))
    }

    /// The next field as `N` bytes of pod type `type_`.
    fn raw<const N: usize>(&mut self, type_: u32) -> Result<[u8; N], PodError> {
        self.need()?
            .bytes(type_)
            .ok_or(PodError::WrongType(self.what))
    }

    fn int(&mut self) -> Result<i32, PodError> {
        self.raw(spa_sys::SPA_TYPE_Int).map(i32::from_ne_bytes)
    }

    fn long(&mut self) -> Result<i64, PodError> {
        self.raw(spa_sys::SPA_TYPE_Long).map(i64::from_ne_bytes)
    }

    fn float(&mut self) -> Result<f32, PodError> {
        self.raw(spa_sys::SPA_TYPE_Float).map(f32::from_ne_bytes)
    }

    fn double(&mut self) -> Result<f64, PodError> {
        self.raw(spa_sys::SPA_TYPE_Double).map(f64::from_ne_bytes)
    }

    fn boolean(&mut self) -> Result<bool, PodError> {
        self.raw(spa_sys::SPA_TYPE_Bool)
            .map(|b| i32::from_ne_bytes(b) != 0)
    }

    /// A NUL-terminated string, up to its first NUL (invalid UTF-8 replaced, not refused: a
    /// node's name is the client's to choose).
    fn string(&mut self) -> Result<String, PodError> {
        let pod = self.need()?;
        if pod.type_ != spa_sys::SPA_TYPE_String {
            return Err(PodError::WrongType(self.what));
        }
        let text = pod.body.split(|&b| b == 0).next().unwrap_or(&[]);
        Ok(String::from_utf8_lossy(text).into_owned())
    }

    fn fraction(&mut self) -> Result<(u32, u32), PodError> {
        let b: [u8; 8] = self.raw(spa_sys::SPA_TYPE_Fraction)?;
        let (num, denom) = b.split_at(4);
        let word = |w: &[u8]| w.try_into().map(u32::from_ne_bytes);
        match (word(num), word(denom)) {
            (Ok(num), Ok(denom)) => Ok((num, denom)),
            _ => Err(PodError::WrongType(self.what)),
        }
    }

    /// The types of the fields not read yet, up to `N` of them (0 past the end).
    fn peek_types<const N: usize>(&self) -> [u32; N] {
        let mut types = [0; N];
        let mut rest = Fields {
            rest: self.rest,
            what: self.what,
        };
        for t in &mut types {
            match rest.next() {
                Some(pod) => *t = pod.type_,
                None => break,
            }
        }
        types
    }

    /// An optional trailing field of a later layout: absent is `None`, another type an error.
    fn opt<T>(
        &mut self,
        read: impl FnOnce(&mut Self) -> Result<T, PodError>,
    ) -> Result<Option<T>, PodError> {
        if self.rest.is_empty() {
            return Ok(None);
        }
        read(self).map(Some)
    }
}

fn info(v: Pod<'_>) -> Result<Info, PodError> {
    let mut f = v.fields("info")?;
    Ok(Info {
        counter: f.long()?,
        cpu_load: [f.float()?, f.float()?, f.float()?],
        xrun_count: f.int()?,
    })
}

fn clock(v: Pod<'_>) -> Result<Clock, PodError> {
    let mut f = v.fields("clock")?;
    let mut clock = Clock {
        flags: f.int()?,
        id: f.int()?,
        name: f.string()?,
        nsec: f.long()?,
        rate: f.fraction()?,
        position: f.long()?,
        duration: f.long()?,
        delay: f.long()?,
        rate_diff: f.double()?,
        next_nsec: f.long()?,
        transport_state: None,
        cycle: None,
        xrun_duration: None,
    };
    // The fields after `next_nsec`, by the layout their types show (see the module's doc).
    const INT: u32 = spa_sys::SPA_TYPE_Int;
    const LONG: u32 = spa_sys::SPA_TYPE_Long;
    match f.peek_types::<3>() {
        [0, ..] => {}
        [INT, INT, LONG] => {
            clock.transport_state = Some(f.int()?);
            clock.cycle = Some(f.int()?);
            clock.xrun_duration = Some(f.long()?);
        }
        [INT, LONG, _] => {
            clock.cycle = Some(f.int()?);
            clock.xrun_duration = Some(f.long()?);
        }
        _ => return Err(PodError::WrongType("clock")),
    }
    Ok(clock)
}

fn block(v: Pod<'_>, what: &'static str) -> Result<Block, PodError> {
    let mut f = v.fields(what)?;
    Ok(Block {
        id: f.int()?,
        name: f.string()?,
        prev_signal: f.long()?,
        signal: f.long()?,
        awake: f.long()?,
        finish: f.long()?,
        status: Status::from(f.int()?),
        latency: f.fraction()?,
        xrun_count: f.opt(Fields::int)?,
        is_async: f.opt(Fields::boolean)?,
    })
}

/// The properties of an Object's body (after its type and id): key and value.
fn properties(body: &[u8]) -> impl Iterator<Item = (u32, Pod<'_>)> {
    let mut rest = body.get(8..).unwrap_or(&[]);
    std::iter::from_fn(move || {
        let key = u32_at(rest, 0)?;
        let (value, after) = Pod::split(rest.get(8..)?)?;
        rest = after;
        Some((key, value))
    })
}

fn record(body: &[u8]) -> Result<ProfilerRecord, PodError> {
    let find = |key, what| {
        properties(body)
            .find(|&(k, _)| k == key)
            .map(|(_, v)| v)
            .ok_or(PodError::Missing(what))
    };
    Ok(ProfilerRecord {
        info: info(find(KEY_INFO, "info")?)?,
        clock: clock(find(KEY_CLOCK, "clock")?)?,
        driver: block(find(KEY_DRIVER_BLOCK, "driverBlock")?, "driverBlock")?,
        followers: properties(body)
            .filter(|&(k, _)| k == KEY_FOLLOWER_BLOCK)
            .map(|(_, v)| block(v, "followerBlock"))
            .collect::<Result<_, _>>()?,
    })
}

fn align8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// Checks the pod's framing before it is read: every container must be tiled exactly by its
/// children, every value must have its type's size, and only the types a profiler pod uses are
/// accepted (anything else is an error, not a guess). (libspa's deserializer, which read these
/// pods before, trusted a Struct's declared size and panicked on a damaged one; this crate's
/// property tests found it.)
fn check_framing(bytes: &[u8], depth: u32) -> Result<usize, PodError> {
    let bad = |why: &str| PodError::Decode(why.to_owned());
    let size = u32_at(bytes, 0).ok_or_else(|| bad("a pod header is cut short"))? as usize;
    let type_ = u32_at(bytes, 4).ok_or_else(|| bad("a pod header is cut short"))?;
    let body = bytes
        .get(8..8 + size)
        .ok_or_else(|| bad("a pod is longer than the bytes that hold it"))?;
    if depth > 8 {
        return Err(bad("pods nested deeper than a profiler record"));
    }
    let fixed = |want: usize| {
        if size == want {
            Ok(())
        } else {
            Err(bad("a value has the wrong size for its type"))
        }
    };
    match type_ {
        spa_sys::SPA_TYPE_None => fixed(0)?,
        spa_sys::SPA_TYPE_Bool
        | spa_sys::SPA_TYPE_Id
        | spa_sys::SPA_TYPE_Int
        | spa_sys::SPA_TYPE_Float => fixed(4)?,
        spa_sys::SPA_TYPE_Long | spa_sys::SPA_TYPE_Double | spa_sys::SPA_TYPE_Fraction => fixed(8)?,
        spa_sys::SPA_TYPE_String => {
            if body.last() != Some(&0) {
                return Err(bad("a string is not NUL-terminated"));
            }
        }
        spa_sys::SPA_TYPE_Struct => {
            let mut at = 0;
            while at < size {
                at += align8(check_framing(&body[at..], depth + 1)?);
            }
            if at != size {
                return Err(bad("a Struct's fields do not fill it exactly"));
            }
        }
        spa_sys::SPA_TYPE_Object => {
            // Object type and id, then properties: key, flags, value.
            let mut at = 8;
            while at < size {
                let value = body
                    .get(at + 8..)
                    .ok_or_else(|| bad("an Object's property is cut short"))?;
                at += 8 + align8(check_framing(value, depth + 1)?);
            }
            if at != size.max(8) || size < 8 {
                return Err(bad("an Object's properties do not fill it exactly"));
            }
        }
        other => {
            return Err(PodError::Decode(format!(
                "a value of pod type {other}, which profiler records do not use"
            )))
        }
    }
    Ok(8 + size)
}

/// The records in one profiler pod (the bytes of a `struct spa_pod`, header included). Objects
/// of other types are skipped; a profiler object that lacks what a record needs is an error.
pub fn parse_profile(bytes: &[u8]) -> Result<Vec<ProfilerRecord>, PodError> {
    check_framing(bytes, 0)?;
    let (top, _) = Pod::split(bytes).ok_or(PodError::NotAStruct)?;
    if top.type_ != spa_sys::SPA_TYPE_Struct {
        return Err(PodError::NotAStruct);
    }
    let mut items = Fields {
        rest: top.body,
        what: "pod",
    };
    let mut records = Vec::new();
    while let Some(item) = items.next() {
        let object_type = u32_at(item.body, 0);
        if item.type_ == spa_sys::SPA_TYPE_Object && object_type == Some(OBJECT_PROFILER) {
            records.push(record(item.body)?);
        }
    }
    Ok(records)
}
