//! The questions `history` asks: xruns in a span (by node, culprit, kind), the top culprits,
//! the drift events; run on the reader's thread.

use crate::rows::{
    CulpritCount, DriftEntry, Facet, Facets, StoredDrift, StoredXrun, XrunCount, XrunEntry,
    XrunHead,
};
use crate::{History, HistoryError};
use rusqlite::types::Value;
use rusqlite::OptionalExtension;

/// Which xruns: all of them by default.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// From this time on (ns since the Unix epoch), inclusive.
    pub since_ns: Option<i64>,
    /// Before this time, exclusive.
    pub until_ns: Option<i64>,
    /// Only this node.
    pub node: Option<String>,
    /// Only this culprit.
    pub culprit: Option<String>,
    /// Only this card kind.
    pub kind: Option<String>,
}

impl Filter {
    /// The WHERE clause and its arguments, columns qualified with `table` (`x.` or nothing).
    fn clause(&self, table: &str) -> (String, Vec<Value>) {
        let mut terms = Vec::new();
        let mut args = Vec::new();
        let mut add = |term: &str, v: Value| {
            terms.push(format!("{table}{term} ?{}", terms.len() + 1));
            args.push(v);
        };
        if let Some(t) = self.since_ns {
            add("time_ns >=", Value::Integer(t));
        }
        if let Some(t) = self.until_ns {
            add("time_ns <", Value::Integer(t));
        }
        if let Some(n) = &self.node {
            add("node =", Value::Text(n.clone()));
        }
        if let Some(c) = &self.culprit {
            add("culprit =", Value::Text(c.clone()));
        }
        if let Some(k) = &self.kind {
            add("kind =", Value::Text(k.clone()));
        }
        if terms.is_empty() {
            (String::new(), args)
        } else {
            (format!("WHERE {}", terms.join(" AND ")), args)
        }
    }
}

impl History {
    /// How many xruns match.
    pub fn count_xruns(&self, filter: &Filter) -> Result<u64, HistoryError> {
        let (clause, args) = filter.clause("");
        self.conn
            .query_row(
                &format!("SELECT COUNT(*) FROM xruns {clause}"),
                rusqlite::params_from_iter(args),
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n as u64)
            .map_err(|e| self.sql(e))
    }

    /// The latest `limit` xruns that match, oldest first.
    pub fn xruns(&self, filter: &Filter, limit: u32) -> Result<Vec<StoredXrun>, HistoryError> {
        let (clause, args) = filter.clause("x.");
        let sql = format!(
            "SELECT * FROM (
                 SELECT x.id, x.session, x.time_ns, x.server, x.node, x.kind, x.root, x.culprit,
                        x.card, s.xrun IS NOT NULL, x.summary
                 FROM xruns x LEFT JOIN snapshots s ON s.xrun = x.id {clause}
                 ORDER BY x.time_ns DESC, x.id DESC LIMIT {limit})
             ORDER BY time_ns, id"
        );
        let mut stmt = self.conn.prepare(&sql).map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(args), |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, Option<i64>>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, Option<String>>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, String>(6)?,
                    r.get::<_, Option<String>>(7)?,
                    r.get::<_, String>(8)?,
                    r.get::<_, bool>(9)?,
                    r.get::<_, String>(10)?,
                ))
            })
            .map_err(|e| self.sql(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (
                id,
                session,
                time_ns,
                server,
                node,
                kind,
                root,
                culprit,
                card,
                has_snapshot,
                summary,
            ) = row.map_err(|e| self.sql(e))?;
            let card = serde_json::from_str(&card).map_err(|e| HistoryError::Corrupt {
                path: self.path.clone(),
                id,
                what: format!("its card is not JSON: {e}"),
            })?;
            out.push(StoredXrun {
                id,
                session,
                has_snapshot,
                entry: XrunEntry {
                    time_ns,
                    server,
                    node,
                    kind,
                    root,
                    culprit,
                    summary,
                    card,
                },
            });
        }
        Ok(out)
    }

    /// The latest `limit` xruns that match without their cards, oldest first: what a list or a
    /// timeline of a long span needs, without reading every card.
    pub fn xrun_heads(&self, filter: &Filter, limit: u32) -> Result<Vec<XrunHead>, HistoryError> {
        let (clause, args) = filter.clause("x.");
        let sql = format!(
            "SELECT * FROM (
                 SELECT x.id, x.time_ns, x.server, x.node, x.kind, x.root, x.culprit, x.summary,
                        s.xrun IS NOT NULL
                 FROM xruns x LEFT JOIN snapshots s ON s.xrun = x.id {clause}
                 ORDER BY x.time_ns DESC, x.id DESC LIMIT {limit})
             ORDER BY time_ns, id"
        );
        let mut stmt = self.conn.prepare(&sql).map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(args), |r| {
                Ok(XrunHead {
                    id: r.get(0)?,
                    time_ns: r.get(1)?,
                    server: r.get(2)?,
                    node: r.get(3)?,
                    kind: r.get(4)?,
                    root: r.get(5)?,
                    culprit: r.get(6)?,
                    summary: r.get(7)?,
                    has_snapshot: r.get(8)?,
                })
            })
            .map_err(|e| self.sql(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.sql(e))
    }

    /// Xrun `id` with its whole card; `None` when it is not on file (never was, or trimmed).
    pub fn xrun(&self, id: i64) -> Result<Option<StoredXrun>, HistoryError> {
        let row = self
            .conn
            .query_row(
                "SELECT x.session, x.time_ns, x.server, x.node, x.kind, x.root, x.culprit,
                        x.summary, x.card, s.xrun IS NOT NULL
                 FROM xruns x LEFT JOIN snapshots s ON s.xrun = x.id WHERE x.id = ?1",
                [id],
                |r| {
                    Ok((
                        r.get::<_, Option<i64>>(0)?,
                        XrunEntry {
                            time_ns: r.get(1)?,
                            server: r.get(2)?,
                            node: r.get(3)?,
                            kind: r.get(4)?,
                            root: r.get(5)?,
                            culprit: r.get(6)?,
                            summary: r.get(7)?,
                            card: serde_json::Value::Null,
                        },
                        r.get::<_, String>(8)?,
                        r.get::<_, bool>(9)?,
                    ))
                },
            )
            .optional()
            .map_err(|e| self.sql(e))?;
        let Some((session, mut entry, card, has_snapshot)) = row else {
            return Ok(None);
        };
        entry.card = serde_json::from_str(&card).map_err(|e| HistoryError::Corrupt {
            path: self.path.clone(),
            id,
            what: format!("its card is not JSON: {e}"),
        })?;
        Ok(Some(StoredXrun {
            id,
            session,
            has_snapshot,
            entry,
        }))
    }

    /// The nodes, culprits and card kinds of the xruns in `[since, until)`, at most `n` of each,
    /// most xruns first (ties by name): the choices of a filter.
    pub fn facets(
        &self,
        since_ns: Option<i64>,
        until_ns: Option<i64>,
        n: u32,
    ) -> Result<Facets, HistoryError> {
        let span = Filter {
            since_ns,
            until_ns,
            ..Filter::default()
        };
        let (clause, args) = span.clause("");
        let column = |name: &str| -> Result<Vec<Facet>, HistoryError> {
            let clause = if clause.is_empty() {
                format!("WHERE {name} IS NOT NULL")
            } else {
                format!("{clause} AND {name} IS NOT NULL")
            };
            let mut stmt = self
                .conn
                .prepare(&format!(
                    "SELECT {name}, COUNT(*) AS n FROM xruns {clause}
                     GROUP BY {name} ORDER BY n DESC, {name} LIMIT {n}"
                ))
                .map_err(|e| self.sql(e))?;
            let rows = stmt
                .query_map(rusqlite::params_from_iter(args.iter()), |r| {
                    Ok(Facet {
                        value: r.get(0)?,
                        xruns: r.get::<_, i64>(1)? as u64,
                    })
                })
                .map_err(|e| self.sql(e))?;
            rows.collect::<Result<_, _>>().map_err(|e| self.sql(e))
        };
        Ok(Facets {
            nodes: column("node")?,
            culprits: column("culprit")?,
            kinds: column("kind")?,
        })
    }

    /// How many drift events are in `[since, until)`.
    pub fn count_drift(
        &self,
        since_ns: Option<i64>,
        until_ns: Option<i64>,
    ) -> Result<u64, HistoryError> {
        self.conn
            .query_row(
                "SELECT COUNT(*) FROM drift WHERE time_ns >= ?1 AND time_ns < ?2",
                [since_ns.unwrap_or(i64::MIN), until_ns.unwrap_or(i64::MAX)],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n as u64)
            .map_err(|e| self.sql(e))
    }

    /// The `n` culprits with the most xruns that match, most first (ties by name).
    pub fn top_culprits(&self, filter: &Filter, n: u32) -> Result<Vec<CulpritCount>, HistoryError> {
        let (clause, args) = filter.clause("");
        let clause = if clause.is_empty() {
            "WHERE culprit IS NOT NULL".to_owned()
        } else {
            format!("{clause} AND culprit IS NOT NULL")
        };
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT culprit, COUNT(*) AS n FROM xruns {clause}
                 GROUP BY culprit ORDER BY n DESC, culprit LIMIT {n}"
            ))
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(args), |r| {
                Ok(CulpritCount {
                    culprit: r.get(0)?,
                    xruns: r.get::<_, i64>(1)? as u64,
                })
            })
            .map_err(|e| self.sql(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.sql(e))
    }

    /// The drift events in `[since, until)`, oldest first (the latest `limit`).
    pub fn drift(
        &self,
        since_ns: Option<i64>,
        until_ns: Option<i64>,
        limit: u32,
    ) -> Result<Vec<StoredDrift>, HistoryError> {
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT * FROM (
                     SELECT id, session, time_ns, kind, subject, before, after, words FROM drift
                     WHERE time_ns >= ?1 AND time_ns < ?2
                     ORDER BY time_ns DESC, id DESC LIMIT {limit})
                 ORDER BY time_ns, id"
            ))
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map(
                [since_ns.unwrap_or(i64::MIN), until_ns.unwrap_or(i64::MAX)],
                |r| {
                    Ok(StoredDrift {
                        id: r.get(0)?,
                        session: r.get(1)?,
                        entry: DriftEntry {
                            time_ns: r.get(2)?,
                            kind: r.get(3)?,
                            subject: r.get(4)?,
                            before: r.get(5)?,
                            after: r.get(6)?,
                            words: r.get(7)?,
                        },
                    })
                },
            )
            .map_err(|e| self.sql(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.sql(e))
    }

    /// The counts of xruns by (server, node, kind, culprit), as the metrics count them.
    pub fn xrun_counts(&self) -> Result<Vec<XrunCount>, HistoryError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT server, COALESCE(node, ''), kind, COALESCE(culprit, ''), COUNT(*)
                 FROM xruns GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
            )
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(XrunCount {
                    server: r.get(0)?,
                    node: r.get(1)?,
                    kind: r.get(2)?,
                    culprit: r.get(3)?,
                    xruns: r.get::<_, i64>(4)? as u64,
                })
            })
            .map_err(|e| self.sql(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.sql(e))
    }
}
