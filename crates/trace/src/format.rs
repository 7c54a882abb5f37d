//! The kernel's description of a trace event's binary layout (`events/<system>/<name>/format`
//! in tracefs) and reading fields out of a raw record by that description. Runs on whichever
//! thread sets the tracer up (parsing) and on the tracer's reader thread (field reads).
//!
//! Field offsets and sizes change between kernel versions and configurations, so nothing here
//! assumes a layout: every read goes through a [`Field`] found by name in the format file.

use std::collections::HashMap;

/// Where a field's bytes live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldLocation {
    /// The value (or fixed-size array) sits at `offset..offset + size`.
    Inline,
    /// `__data_loc`: a u32 at `offset` whose low 16 bits are the data's offset from the record
    /// start and whose high 16 bits are its length.
    DataLoc,
    /// `__rel_loc`: like [`FieldLocation::DataLoc`], but the offset counts from the end of the
    /// u32 itself.
    RelLoc,
}

/// One field of an event record, as its `format` file declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Field name, e.g. `prev_pid` (array brackets removed).
    pub name: String,
    /// The C type as written, e.g. `pid_t`, `char[16]` or `__data_loc char[]`.
    pub c_type: String,
    /// Byte offset from the start of the record (common fields included).
    pub offset: usize,
    /// Size in bytes at `offset`.
    pub size: usize,
    /// Whether the integer is signed.
    pub signed: bool,
    /// Inline, `__data_loc` or `__rel_loc`.
    pub location: FieldLocation,
}

/// Why an event's `format` file could not be used; the message quotes the line or names the
/// event and field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// The `ID:` line does not hold a number 0..=65535.
    #[error("ID is not a 16-bit number: {line:?}")]
    Id {
        /// The line as read.
        line: String,
    },
    /// A `field:` line is malformed.
    #[error("{what} in format line {line:?}")]
    FieldLine {
        /// What is wrong ("bad offset", "no size"...).
        what: &'static str,
        /// The line as read.
        line: String,
    },
    /// A line every format file has (`name:` or `ID:`) is missing.
    #[error("no `{0}:` line")]
    MissingLine(&'static str),
    /// The event has no field of that name.
    #[error("event {event} has no field `{field}`")]
    NoField {
        /// The event's name.
        event: String,
        /// The field asked for.
        field: String,
    },
    /// A decoder was asked for with no formats at all.
    #[error("no event formats given")]
    NoFormats,
}

/// The parsed `format` file of one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFormat {
    /// Event name, e.g. `sched_switch`.
    pub name: String,
    /// Numeric id: the perf tracepoint config and the record's `common_type`.
    pub id: u16,
    /// All fields by name, common fields included.
    pub fields: HashMap<String, Field>,
}

impl EventFormat {
    /// Parses the text of a `format` file. The error names the line that did not parse.
    ///
    /// ```
    /// let text = "name: sched_waking\nID: 375\nformat:\n\
    ///     \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
    ///     \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
    ///     \tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n\
    ///     print fmt: \"pid=%d\", REC->pid\n";
    /// let f = xrunlab_trace::format::EventFormat::parse(text).unwrap();
    /// assert_eq!(f.id, 375);
    /// assert_eq!(f.field("pid").unwrap().offset, 24);
    /// ```
    pub fn parse(text: &str) -> Result<EventFormat, FormatError> {
        let mut name = None;
        let mut id = None;
        let mut fields = HashMap::new();
        for line in text.lines() {
            let line = line.trim();
            if let Some(rest) = line.strip_prefix("name:") {
                name = Some(rest.trim().to_owned());
            } else if let Some(rest) = line.strip_prefix("ID:") {
                let n: u16 = rest.trim().parse().map_err(|_| FormatError::Id {
                    line: line.to_owned(),
                })?;
                id = Some(n);
            } else if line.starts_with("field:") {
                let field = parse_field_line(line)?;
                fields.insert(field.name.clone(), field);
            } else if line.starts_with("print fmt:") {
                break;
            }
        }
        Ok(EventFormat {
            name: name.ok_or(FormatError::MissingLine("name"))?,
            id: id.ok_or(FormatError::MissingLine("ID"))?,
            fields,
        })
    }

    /// The field called `name`, or an error naming the event and the field.
    pub fn field(&self, name: &str) -> Result<Field, FormatError> {
        self.fields
            .get(name)
            .cloned()
            .ok_or_else(|| FormatError::NoField {
                event: self.name.clone(),
                field: name.to_owned(),
            })
    }
}

/// Parses `field:TYPE NAME;\toffset:N;\tsize:N;\tsigned:N;`.
fn parse_field_line(line: &str) -> Result<Field, FormatError> {
    let bad = |what: &'static str| FormatError::FieldLine {
        what,
        line: line.to_owned(),
    };
    let mut decl = None;
    let mut offset = None;
    let mut size = None;
    let mut signed = false;
    for part in line.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        if let Some(d) = part.strip_prefix("field:") {
            decl = Some(d.trim());
        } else if let Some(v) = part.strip_prefix("offset:") {
            offset = Some(within_record(v, "bad offset", "offset above 65535").map_err(bad)?);
        } else if let Some(v) = part.strip_prefix("size:") {
            size = Some(within_record(v, "bad size", "size above 65535").map_err(bad)?);
        } else if let Some(v) = part.strip_prefix("signed:") {
            signed = v == "1";
        }
    }
    let decl = decl.ok_or_else(|| bad("no declaration"))?;
    // The name is the last identifier of the declaration, before any array brackets.
    let (type_part, name_part) = decl
        .rsplit_once(' ')
        .ok_or_else(|| bad("no type before the field name"))?;
    let (name, array) = match name_part.split_once('[') {
        Some((n, rest)) => (n, format!("[{rest}")),
        None => (name_part, String::new()),
    };
    let location = if type_part.starts_with("__data_loc") {
        FieldLocation::DataLoc
    } else if type_part.starts_with("__rel_loc") {
        FieldLocation::RelLoc
    } else {
        FieldLocation::Inline
    };
    Ok(Field {
        name: name.to_owned(),
        c_type: format!("{type_part}{array}"),
        offset: offset.ok_or_else(|| bad("no offset"))?,
        size: size.ok_or_else(|| bad("no size"))?,
        signed,
        location,
    })
}

/// The largest offset or size a field may declare: a record is at most a ring-buffer page, and
/// `__data_loc` words address it with 16 bits. Keeps `offset + size` far from overflow.
pub const MAX_RECORD_BYTES: usize = 65_535;

/// A decimal offset or size of at most [`MAX_RECORD_BYTES`]; else `not_a_number` or
/// `too_large`.
fn within_record(
    v: &str,
    not_a_number: &'static str,
    too_large: &'static str,
) -> Result<usize, &'static str> {
    match v.parse::<u64>() {
        Ok(n) if n <= MAX_RECORD_BYTES as u64 => Ok(n as usize),
        Ok(_) => Err(too_large),
        Err(_) => Err(not_a_number),
    }
}

impl Field {
    /// The record bytes at `offset..offset + len`, `None` past its end (or past `usize`: a
    /// [`Field`] made by hand can hold any offset).
    #[inline]
    fn span(raw: &[u8], offset: usize, len: usize) -> Option<&[u8]> {
        raw.get(offset..offset.checked_add(len)?)
    }

    /// Reads an integer field (1, 2, 4 or 8 bytes, native byte order), sign-extended when the
    /// format says signed. `None` when the record is too short or the size is unusual.
    #[inline]
    pub fn read_int(&self, raw: &[u8]) -> Option<i64> {
        let bytes = Self::span(raw, self.offset, self.size)?;
        let v = match (self.size, self.signed) {
            (1, false) => i64::from(bytes[0]),
            (1, true) => i64::from(bytes[0] as i8),
            (2, false) => i64::from(u16::from_ne_bytes(bytes.try_into().ok()?)),
            (2, true) => i64::from(i16::from_ne_bytes(bytes.try_into().ok()?)),
            (4, false) => i64::from(u32::from_ne_bytes(bytes.try_into().ok()?)),
            (4, true) => i64::from(i32::from_ne_bytes(bytes.try_into().ok()?)),
            (8, _) => i64::from_ne_bytes(bytes.try_into().ok()?),
            _ => return None,
        };
        Some(v)
    }

    /// Reads a string field: a fixed `char[N]` or a `__data_loc`/`__rel_loc` string, up to its
    /// first NUL. `None` when the record is too short for the declared location.
    #[inline]
    pub fn read_bytes<'r>(&self, raw: &'r [u8]) -> Option<&'r [u8]> {
        let bytes = match self.location {
            FieldLocation::Inline => Self::span(raw, self.offset, self.size)?,
            FieldLocation::DataLoc | FieldLocation::RelLoc => {
                let word = Self::span(raw, self.offset, 4)?;
                let loc = u32::from_ne_bytes(word.try_into().ok()?);
                let mut start = (loc & 0xffff) as usize;
                if self.location == FieldLocation::RelLoc {
                    start = start.checked_add(self.offset.checked_add(4)?)?;
                }
                let len = (loc >> 16) as usize;
                Self::span(raw, start, len)?
            }
        };
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        Some(&bytes[..end])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sched_migrate_task format of Linux 6.18 on x86_64 (as read from this machine).
    pub(crate) const MIGRATE: &str = "name: sched_migrate_task\nID: 371\nformat:\n\
        \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
        \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
        \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
        \tfield:__data_loc char[] comm;\toffset:8;\tsize:4;\tsigned:0;\n\
        \tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;\n\
        \tfield:int prio;\toffset:16;\tsize:4;\tsigned:1;\n\
        \tfield:int orig_cpu;\toffset:20;\tsize:4;\tsigned:1;\n\
        \tfield:int dest_cpu;\toffset:24;\tsize:4;\tsigned:1;\n\n\
        print fmt: \"comm=%s pid=%d\", __get_str(comm), REC->pid\n";

    #[test]
    fn parses_names_types_offsets_and_locations() {
        let f = EventFormat::parse(MIGRATE).unwrap();
        assert_eq!(f.name, "sched_migrate_task");
        assert_eq!(f.id, 371);
        assert_eq!(f.fields.len(), 9);
        let comm = f.field("comm").unwrap();
        assert_eq!(comm.location, FieldLocation::DataLoc);
        assert_eq!(comm.c_type, "__data_loc char[]");
        assert_eq!((comm.offset, comm.size), (8, 4));
        let pid = f.field("pid").unwrap();
        assert_eq!((pid.offset, pid.size, pid.signed), (12, 4, true));
        assert!(f
            .field("nope")
            .unwrap_err()
            .to_string()
            .contains("no field `nope`"));
    }

    #[test]
    fn fixed_arrays_keep_their_name_without_brackets() {
        let f =
            parse_field_line("field:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;").unwrap();
        assert_eq!(f.name, "prev_comm");
        assert_eq!(f.c_type, "char[16]");
        assert_eq!(f.location, FieldLocation::Inline);
    }

    #[test]
    fn reads_data_loc_strings_and_signed_ints_from_bytes() {
        let f = EventFormat::parse(MIGRATE).unwrap();
        let mut raw = vec![0u8; 28];
        raw[0..2].copy_from_slice(&371u16.to_ne_bytes());
        raw[12..16].copy_from_slice(&4711i32.to_ne_bytes());
        raw[20..24].copy_from_slice(&(-1i32).to_ne_bytes());
        // "xrl-hog\0" appended after the fixed part; data_loc = len << 16 | offset.
        raw.extend_from_slice(b"xrl-hog\0");
        raw[8..12].copy_from_slice(&((8u32 << 16) | 28).to_ne_bytes());
        assert_eq!(f.field("pid").unwrap().read_int(&raw), Some(4711));
        assert_eq!(f.field("orig_cpu").unwrap().read_int(&raw), Some(-1));
        assert_eq!(
            f.field("comm").unwrap().read_bytes(&raw),
            Some(&b"xrl-hog"[..])
        );
        // A truncated record gives None, not a panic.
        assert_eq!(f.field("dest_cpu").unwrap().read_int(&raw[..20]), None);
        assert_eq!(f.field("comm").unwrap().read_bytes(&raw[..30]), None);
    }

    #[test]
    fn forged_offsets_and_sizes_are_errors_and_never_overflow_a_read() {
        for line in [
            "field:int a;\toffset:18446744073709551615;\tsize:4;\tsigned:1;",
            "field:int a;\toffset:65536;\tsize:4;\tsigned:1;",
        ] {
            let err = parse_field_line(line).unwrap_err();
            assert!(
                matches!(
                    &err,
                    FormatError::FieldLine {
                        what: "offset above 65535",
                        ..
                    }
                ),
                "{err:?}"
            );
        }
        let err =
            parse_field_line("field:char s[1];\toffset:8;\tsize:99999999;\tsigned:0;").unwrap_err();
        assert!(
            matches!(
                &err,
                FormatError::FieldLine {
                    what: "size above 65535",
                    ..
                }
            ),
            "{err:?}"
        );
        let at_limit = parse_field_line("field:char s[1];\toffset:65535;\tsize:65535;\tsigned:0;");
        assert_eq!(at_limit.unwrap().offset, MAX_RECORD_BYTES);
        // A field made by hand (not parsed) at the end of usize reads nothing.
        let raw = [0xffu8; 64];
        for location in [
            FieldLocation::Inline,
            FieldLocation::DataLoc,
            FieldLocation::RelLoc,
        ] {
            let far = Field {
                name: "far".into(),
                c_type: "int".into(),
                offset: usize::MAX - 1,
                size: 4,
                signed: true,
                location,
            };
            assert_eq!(far.read_int(&raw), None);
            assert_eq!(far.read_bytes(&raw), None);
        }
        // A rel_loc word pointing past the record reads nothing.
        let mut raw = [0u8; 16];
        raw[0..4].copy_from_slice(&((0xffffu32 << 16) | 0xffff).to_ne_bytes());
        let rel = Field {
            offset: 0,
            location: FieldLocation::RelLoc,
            ..parse_field_line("field:__rel_loc char[] s;\toffset:0;\tsize:4;\tsigned:0;").unwrap()
        };
        assert_eq!(rel.read_bytes(&raw), None);
    }

    #[test]
    fn bad_lines_are_errors_that_quote_the_line() {
        let err = EventFormat::parse("name: x\nID: 1\n\tfield:int a;\toffset:zz;\tsize:4;\n")
            .unwrap_err();
        assert!(
            matches!(&err, FormatError::FieldLine { what: "bad offset", line } if line.contains("zz")),
            "{err:?}"
        );
        assert!(err.to_string().contains("bad offset"), "{err}");
        assert_eq!(
            EventFormat::parse("ID: 1\n").unwrap_err(),
            FormatError::MissingLine("name")
        );
    }
}
