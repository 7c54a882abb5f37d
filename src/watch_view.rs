//! watch's live view, like pw-top: the graph's nodes (quantum, rate, WAIT, BUSY, their share
//! of the cycle, ERR, xruns) on top and the xrun log below, drawn with ratatui on watch's main
//! thread at most four times a second. `--batch`, or a standard output that is not a terminal,
//! prints plain lines instead (see `watch_cmd`).

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style, Stylize};
use ratatui::text::Line;
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table};
use ratatui::{DefaultTerminal, Frame};
use std::collections::VecDeque;
use std::time::{Duration, Instant};
use xrunlab_sys::printable;
use xrunlab_watch::{Detector, NodeStatus};

/// xrun lines kept for the view and for printing after it closes: a 24-hour watch stays flat.
pub const LOG_KEPT: usize = 500;
/// The least time between two redraws.
const REDRAW: Duration = Duration::from_millis(250);
/// Redrawn at least this often, so the figures move even without xruns.
const REFRESH: Duration = Duration::from_secs(1);

/// One node's row, as the view shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeRow {
    /// The node's state in its last cycle, one letter as pw-top shows it.
    pub state: char,
    /// The server's node id (JACK: watch's own index).
    pub id: u32,
    /// Whether it drives the graph (followers are listed under it, as pw-top does).
    pub driver: bool,
    /// Whether it took part in a cycle yet (an idle node is listed without the follower mark).
    pub active: bool,
    /// Name, and the application's name when it differs.
    pub name: String,
    /// The process behind it.
    pub pid: Option<i32>,
    /// Its last WAIT (signal to awake), ns.
    pub wait_ns: Option<u64>,
    /// Its last BUSY (awake to finish), ns.
    pub busy_ns: Option<u64>,
    /// Cycles it was late in.
    pub err: u64,
    /// xruns blamed on it.
    pub xruns: u64,
}

/// Everything one screen shows.
#[derive(Debug, Clone, Default)]
pub struct Screen {
    /// "PipeWire 0.3.65 (profiler)" and the like.
    pub server: String,
    /// Where kernel events come from, or why there are none.
    pub kernel: String,
    /// Frames per cycle and rate, once a cycle has been seen.
    pub quantum: Option<(u32, u32)>,
    /// Cycles seen and xruns found.
    pub cycles: u64,
    /// See `cycles`.
    pub xruns: u64,
    /// Seconds watched.
    pub elapsed_s: f64,
    /// The rows, by node id.
    pub nodes: Vec<NodeRow>,
    /// Why a column is empty, when it is (JACK2's timing without kernel events).
    pub note: Option<String>,
}

fn state_letter(s: Option<NodeStatus>) -> char {
    match s {
        Some(NodeStatus::Finished) => 'R',
        Some(NodeStatus::Awake) => 'A',
        Some(NodeStatus::Triggered) => 'T',
        Some(NodeStatus::NotTriggered) | Some(NodeStatus::Inactive) => 'I',
        Some(NodeStatus::Unknown(_)) | None => '-',
    }
}

impl Screen {
    /// The rows of `detector`'s nodes: drivers first, then the followers.
    pub fn rows(detector: &Detector) -> Vec<NodeRow> {
        let mut rows: Vec<NodeRow> = detector
            .nodes()
            .values()
            .map(|s| {
                // Both names come from the server's clients: escaped before they reach the screen.
                let name = match &s.info.app_name {
                    Some(app) if *app != s.info.name => {
                        format!("{} ({})", printable(&s.info.name), printable(app))
                    }
                    _ => printable(&s.info.name).into_owned(),
                };
                NodeRow {
                    state: state_letter(s.last().map(|t| t.status)),
                    id: s.info.id,
                    driver: s.driver,
                    active: s.last().is_some(),
                    name,
                    pid: s.info.pid,
                    wait_ns: s.last_wait_ns,
                    busy_ns: s.last_busy_ns,
                    err: s.err_cycles,
                    xruns: s.xruns,
                }
            })
            .collect();
        rows.sort_by_key(|r| (!r.driver, r.id));
        rows
    }
}

/// A duration for a narrow column: µs below 10 ms, ms above.
fn short(ns: Option<u64>) -> String {
    match ns {
        None => "-".into(),
        Some(ns) if ns < 10_000_000 => format!("{:.1}µs", ns as f64 / 1e3),
        Some(ns) => format!("{:.2}ms", ns as f64 / 1e6),
    }
}

/// A share of the cycle, as pw-top's W/Q and B/Q.
fn share(ns: Option<u64>, period_ns: Option<u64>) -> String {
    match (ns, period_ns) {
        (Some(ns), Some(p)) if p > 0 => format!("{:.2}", ns as f64 / p as f64),
        _ => "-".into(),
    }
}

/// Draws `screen` and the newest lines of `log` into `frame`.
pub fn draw(frame: &mut Frame, screen: &Screen, log: &VecDeque<String>) {
    let table_height = (screen.nodes.len() as u16 + 3)
        .min(frame.area().height / 2)
        .max(4);
    let [head, nodes, xruns] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Length(table_height),
        Constraint::Min(3),
    ])
    .areas(frame.area());

    let (quantum, rate) = screen.quantum.unwrap_or((0, 0));
    let period_ns = (rate > 0).then(|| u64::from(quantum) * 1_000_000_000 / u64::from(rate));
    let mut header = vec![
        Line::from(format!(
            "xrunlab watch: {} for {:.0} s, {} cycles, {} xruns (q or Ctrl-C ends with a summary)",
            screen.server, screen.elapsed_s, screen.cycles, screen.xruns
        ))
        .bold(),
        Line::from(format!("kernel events: {}", screen.kernel)),
    ];
    if let Some(n) = &screen.note {
        header.push(Line::from(n.clone()).italic());
    }
    frame.render_widget(Paragraph::new(header), head);

    let widths = [
        Constraint::Length(1),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Length(5),
        Constraint::Length(5),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(8),
        Constraint::Fill(1),
    ];
    let q = |v: u32| {
        if v == 0 {
            "-".to_owned()
        } else {
            v.to_string()
        }
    };
    let rows = screen.nodes.iter().map(|n| {
        let row = Row::new(vec![
            Cell::from(n.state.to_string()),
            Cell::from(n.id.to_string()),
            Cell::from(q(quantum)),
            Cell::from(q(rate)),
            Cell::from(short(n.wait_ns)),
            Cell::from(short(n.busy_ns)),
            Cell::from(share(n.wait_ns, period_ns)),
            Cell::from(share(n.busy_ns, period_ns)),
            Cell::from(n.err.to_string()),
            Cell::from(n.xruns.to_string()),
            Cell::from(n.pid.map_or("-".into(), |p| p.to_string())),
            Cell::from(if n.driver || !n.active {
                n.name.clone()
            } else {
                format!(" + {}", n.name)
            }),
        ]);
        if n.xruns > 0 {
            row.style(Style::new().red())
        } else {
            row
        }
    });
    let table = Table::new(rows, widths)
        .header(
            Row::new([
                "S", "ID", "QUANT", "RATE", "WAIT", "BUSY", "W/Q", "B/Q", "ERR", "XRUNS", "PID",
                "NAME",
            ])
            .style(Style::new().add_modifier(Modifier::REVERSED)),
        )
        .block(Block::bordered().title(" nodes "));
    frame.render_widget(table, nodes);

    // The newest lines that fit, oldest first.
    let fit = xruns.height.saturating_sub(2) as usize;
    let lines: Vec<Line> = log
        .iter()
        .skip(log.len().saturating_sub(fit))
        .map(|l| Line::from(l.as_str()))
        .collect();
    let title = if log.is_empty() {
        " xruns: none yet ".to_owned()
    } else {
        format!(" xruns: the last {} ", lines.len())
    };
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(title)),
        xruns,
    );
}

/// The xrun lines the view keeps: the newest [`LOG_KEPT`], and a count of the older ones.
#[derive(Debug, Default)]
pub struct XrunLog {
    /// The lines kept, oldest first.
    pub lines: VecDeque<String>,
    /// Lines that fell out of `lines`.
    pub dropped: u64,
}

impl XrunLog {
    /// Adds a line, dropping the oldest when full.
    pub fn push(&mut self, line: String) {
        if self.lines.len() == LOG_KEPT {
            self.lines.pop_front();
            self.dropped += 1;
        }
        self.lines.push_back(line);
    }
}

/// The live view on the terminal: raw mode and the alternate screen while it lives (ratatui's
/// panic hook restores the terminal if watch panics).
pub struct LiveView {
    terminal: DefaultTerminal,
    log: XrunLog,
    last_draw: Option<Instant>,
    dirty: bool,
}

impl LiveView {
    /// Takes over the terminal.
    pub fn start() -> std::io::Result<LiveView> {
        let terminal = ratatui::try_init()?;
        Ok(LiveView {
            terminal,
            log: XrunLog::default(),
            last_draw: None,
            dirty: true,
        })
    }

    /// Adds one line to the xrun log (shown at the next redraw).
    pub fn log(&mut self, line: String) {
        self.log.push(line);
        self.dirty = true;
    }

    /// Redraws when something changed (at most every 250 ms) or a second has passed.
    pub fn tick(&mut self, screen: impl FnOnce() -> Screen) -> std::io::Result<()> {
        let due = self.last_draw.is_none_or(|t| {
            let since = t.elapsed();
            (self.dirty && since >= REDRAW) || since >= REFRESH
        });
        if !due {
            return Ok(());
        }
        let screen = screen();
        let log = &self.log.lines;
        self.terminal.draw(|f| draw(f, &screen, log))?;
        self.last_draw = Some(Instant::now());
        self.dirty = false;
        Ok(())
    }

    /// Whether the user asked to end (q, Esc, or Ctrl-C, which raw mode turns into a key).
    pub fn quit_requested(&mut self) -> bool {
        while event::poll(Duration::ZERO).unwrap_or(false) {
            let Ok(Event::Key(k)) = event::read() else {
                continue;
            };
            if k.kind != KeyEventKind::Press {
                continue;
            }
            let ctrl_c =
                k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
            if ctrl_c || matches!(k.code, KeyCode::Char('q') | KeyCode::Esc) {
                return true;
            }
        }
        false
    }

    /// Gives the terminal back; returns the xrun lines it kept.
    pub fn finish(mut self) -> XrunLog {
        std::mem::take(&mut self.log)
    }
}

/// The terminal is given back however watch ends: a summary, an error, or a panic.
impl Drop for LiveView {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    fn text(t: &Terminal<TestBackend>) -> String {
        let buf = t.backend().buffer();
        let w = buf.area.width as usize;
        buf.content
            .chunks(w)
            .map(|row| row.iter().map(|c| c.symbol()).collect::<String>())
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn the_screen_shows_each_node_with_its_share_of_the_cycle_and_the_newest_xruns() {
        let screen = Screen {
            server: "PipeWire 0.3.65 (profiler)".into(),
            kernel: "recorded on CPUs [0, 1]".into(),
            quantum: Some((256, 48_000)),
            cycles: 1200,
            xruns: 2,
            elapsed_s: 6.4,
            nodes: vec![
                NodeRow {
                    state: 'R',
                    id: 34,
                    driver: false,
                    active: true,
                    name: "synth (bitwig)".into(),
                    pid: Some(4242),
                    wait_ns: Some(40_000),
                    busy_ns: Some(2_666_666),
                    err: 3,
                    xruns: 2,
                },
                NodeRow {
                    state: 'I',
                    id: 35,
                    driver: false,
                    active: false,
                    name: "reverb".into(),
                    pid: None,
                    wait_ns: None,
                    busy_ns: None,
                    err: 0,
                    xruns: 0,
                },
            ],
            note: None,
        };
        let mut log = VecDeque::new();
        for i in 1..=30 {
            log.push_back(format!("xrun {i}: \"synth\" ran long"));
        }
        let mut t = Terminal::new(TestBackend::new(120, 24)).expect("test terminal");
        t.draw(|f| draw(f, &screen, &log)).expect("draws");
        let s = text(&t);
        for want in [
            "PipeWire 0.3.65",
            "1200 cycles, 2 xruns",
            "QUANT",
            "W/Q",
            "B/Q",
            "256",
            "48000",
            "40.0µs",
            "2666.7µs",
            // BUSY / period: 2.667 ms of 5.333 ms.
            "0.50",
            " + synth (bitwig)",
            "4242",
            "reverb",
            "xrun 30:",
        ] {
            assert!(s.contains(want), "{want:?} missing from:\n{s}");
        }
        assert!(
            !s.contains("+ reverb"),
            "a node in no cycle yet is not listed as a follower"
        );
        // Only the newest xruns that fit are shown: not the first of 30 on a 24-line screen.
        assert!(!s.contains("xrun 1:"), "{s}");
    }

    #[test]
    fn the_log_keeps_a_bounded_number_of_lines_and_counts_the_rest() {
        let mut log = XrunLog::default();
        for i in 0..(LOG_KEPT + 7) {
            log.push(i.to_string());
        }
        assert_eq!((log.lines.len(), log.dropped), (LOG_KEPT, 7));
        assert_eq!(log.lines.front().map(String::as_str), Some("7"));
    }
}
