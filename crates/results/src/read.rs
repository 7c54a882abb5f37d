//! Reading result files back as types: every failure names the file and the field (a wrong
//! schema, a truncated file, a histogram in other units), so the CLI can refuse it with exit 2.
//! Runs on the main thread.

use serde::de::DeserializeOwned;
use std::fmt;
use std::path::{Path, PathBuf};

/// Why a result file cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadError {
    /// The file.
    pub file: PathBuf,
    /// The field at fault ("schema", "histograms.load_pct", ...; "(file)" for the file as a whole).
    pub field: String,
    /// What is wrong, and what was expected.
    pub problem: String,
}

impl ReadError {
    /// An error about `field` of `file`.
    pub fn new(file: &Path, field: &str, problem: impl Into<String>) -> ReadError {
        ReadError {
            file: file.to_path_buf(),
            field: field.to_owned(),
            problem: problem.into(),
        }
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: field {}: {}",
            self.file.display(),
            self.field,
            self.problem
        )
    }
}

impl std::error::Error for ReadError {}

/// Reads `path` as a `T` whose layout is `schema`. The schema is checked first, so a file of
/// another kind is named as such rather than by its first missing field.
pub fn read_typed<T: DeserializeOwned>(path: &Path, schema: &str) -> Result<T, ReadError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ReadError::new(path, "(file)", format!("cannot read it: {e}")))?;
    parse_typed(path, &text, schema)
}

/// [`read_typed`] over text already read from `path`.
pub fn parse_typed<T: DeserializeOwned>(
    path: &Path,
    text: &str,
    schema: &str,
) -> Result<T, ReadError> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        let what = if e.is_eof() {
            "the file ends early (truncated?)"
        } else {
            "not JSON"
        };
        ReadError::new(path, "(file)", format!("{what}: {e}"))
    })?;
    match value.get("schema").and_then(|s| s.as_str()) {
        Some(s) if s == schema => {}
        Some(other) => {
            return Err(ReadError::new(
                path,
                "schema",
                format!("is {other:?}; this reads {schema:?} files"),
            ))
        }
        None => {
            return Err(ReadError::new(
                path,
                "schema",
                format!("missing; this reads {schema:?} files"),
            ))
        }
    }
    serde_path_to_error(path, value)
}

/// Deserializes, naming the path of the first field that does not fit.
fn serde_path_to_error<T: DeserializeOwned>(
    path: &Path,
    value: serde_json::Value,
) -> Result<T, ReadError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let field = e.path().to_string();
        ReadError::new(path, &field, e.into_inner().to_string())
    })
}
