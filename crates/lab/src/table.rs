//! The rows of an experiment's `--csv`: a header and one row per measured point; built on the
//! caller's thread.

/// Rows for `--csv`: a header and one row per measured point.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    /// Column names.
    pub header: Vec<String>,
    /// One entry per column in each row.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these columns and no rows.
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (one value per column).
    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// The table as CSV text (quoted where the csv crate needs it).
    pub fn to_csv(&self) -> Result<Vec<u8>, csv::Error> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(&self.header)?;
        for r in &self.rows {
            w.write_record(r)?;
        }
        w.into_inner().map_err(|e| e.into_error().into())
    }
}

/// Formats an optional figure for a CSV cell (empty when absent).
pub fn cell(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.3}")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_is_csv_with_its_header() {
        let mut t = Table::new(&["a", "b"]);
        t.push(vec!["1".into(), "x,y".into()]);
        assert_eq!(t.to_csv().unwrap(), b"a,b\n1,\"x,y\"\n");
    }
}
