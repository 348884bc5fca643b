//! The screen: ratatui over crossterm (raw mode and the alternate screen, restored on exit
//! and on panic; plain ANSI, so it works over SSH). Keys: s sort, p port filter, i interface
//! filter, c clear, space freeze, q / Esc / Ctrl-C quit.

use super::text::{sections, Section};
use anyhow::{Context, Result};
use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use firehose_observe::top::{Frame, Reading, Sampler, View};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph, Row, Table};
use std::time::{Duration, Instant};

/// A prompt being typed.
enum Mode {
    Normal,
    Port(String),
    Iface(String),
}

struct State {
    sampler: Sampler,
    view: View,
    rows: usize,
    prev: Reading,
    cur: Reading,
    frame: Frame,
    frozen: bool,
    mode: Mode,
    message: String,
}

impl State {
    fn refilter(&mut self) {
        self.frame = self
            .sampler
            .frame(&self.prev, &self.cur, &self.view, self.rows);
    }

    /// Handles a key; false to quit.
    fn key(&mut self, k: KeyEvent) -> bool {
        let ctrl_c = k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c');
        if ctrl_c {
            return false;
        }
        // A message stays until the next key.
        if matches!(self.mode, Mode::Normal) {
            self.message.clear();
        }
        match &mut self.mode {
            Mode::Port(buf) | Mode::Iface(buf) => match k.code {
                KeyCode::Esc => self.mode = Mode::Normal,
                KeyCode::Backspace => {
                    buf.pop();
                }
                KeyCode::Char(c) if !c.is_control() && buf.len() < 32 => buf.push(c),
                KeyCode::Enter => {
                    let mode = std::mem::replace(&mut self.mode, Mode::Normal);
                    match mode {
                        Mode::Port(b) if b.is_empty() => self.view.port = None,
                        Mode::Port(b) => match crate::args::parse_port(&b) {
                            Ok(p) => self.view.port = Some(p),
                            Err(e) => self.message = e,
                        },
                        Mode::Iface(b) if b.is_empty() => self.view.iface = None,
                        Mode::Iface(b) => self.view.iface = Some(b),
                        Mode::Normal => {}
                    }
                    self.refilter();
                }
                _ => {}
            },
            Mode::Normal => match k.code {
                KeyCode::Char('q') | KeyCode::Esc => return false,
                KeyCode::Char('s') => {
                    self.view.sort = self.view.sort.next();
                    self.refilter();
                }
                KeyCode::Char('p') => self.mode = Mode::Port(String::new()),
                KeyCode::Char('i') => self.mode = Mode::Iface(String::new()),
                KeyCode::Char('c') => {
                    self.view.port = None;
                    self.view.iface = None;
                    self.refilter();
                }
                KeyCode::Char(' ') | KeyCode::Char('f') => self.frozen = !self.frozen,
                _ => {}
            },
        }
        true
    }

    fn status(&self) -> String {
        let filter = match (&self.view.port, &self.view.iface) {
            (None, None) => "none".to_string(),
            (p, i) => [
                p.map(|p| format!("port {p}")),
                i.as_ref().map(|i| format!("iface {i}")),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(", "),
        };
        let prompt = match &self.mode {
            Mode::Normal => String::new(),
            Mode::Port(b) => format!("  port (Enter; empty clears): {b}_"),
            Mode::Iface(b) => format!("  interface (Enter; empty clears): {b}_"),
        };
        format!(
            "firehose top  {:.1} s  sort: {}  filter: {}{}  |  s sort  p port  i iface  c clear  space freeze  q quit{}{}",
            self.frame.seconds,
            self.view.sort.name(),
            filter,
            if self.frozen { "  [FROZEN]" } else { "" },
            prompt,
            if self.message.is_empty() { String::new() } else { format!("  ({})", self.message) }
        )
    }
}

fn table(s: &Section) -> Table<'_> {
    let widths: Vec<Constraint> = s
        .header
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let w = s
                .rows
                .iter()
                .map(|r| r.get(i).map_or(0, |c| c.len()))
                .max()
                .unwrap_or(0)
                .max(h.len());
            if i + 1 == s.header.len() {
                Constraint::Min(w as u16)
            } else {
                Constraint::Length(w as u16)
            }
        })
        .collect();
    let rows = s.rows.iter().map(|r| Row::new(r.clone()));
    Table::new(rows, widths)
        .header(Row::new(s.header.clone()).style(Style::new().add_modifier(Modifier::BOLD)))
        .block(Block::bordered().title(s.title.clone()))
        .column_spacing(2)
}

fn draw(f: &mut ratatui::Frame<'_>, st: &State) {
    let secs = sections(&st.frame);
    let mut constraints = vec![Constraint::Length(1)];
    constraints.extend(
        secs.iter()
            .map(|s| Constraint::Length(s.rows.len().max(1) as u16 + 3)),
    );
    constraints.push(Constraint::Min(0));
    let areas = Layout::vertical(constraints).split(f.area());
    f.render_widget(
        Paragraph::new(Line::from(st.status()))
            .style(Style::new().add_modifier(Modifier::REVERSED)),
        areas[0],
    );
    for (i, s) in secs.iter().enumerate() {
        f.render_widget(table(s), areas[i + 1]);
    }
    let notes: Vec<Line<'_>> = st
        .frame
        .notes
        .iter()
        .map(|n| Line::from(format!("note: {n}")))
        .collect();
    f.render_widget(Paragraph::new(notes), areas[secs.len() + 1]);
}

/// Runs the screen until q (or `duration`).
pub fn run(
    mut sampler: Sampler,
    view: View,
    interval: Duration,
    rows: usize,
    duration: Option<Duration>,
) -> Result<()> {
    let start = Instant::now();
    let prev = sampler.read();
    let cur = prev.clone();
    let frame = sampler.frame(&prev, &cur, &view, rows);
    let mut st = State {
        sampler,
        view,
        rows,
        prev,
        cur,
        frame,
        frozen: false,
        mode: Mode::Normal,
        message: String::new(),
    };
    let mut term = ratatui::try_init().context("setting up the terminal")?;
    let res = (|| -> Result<()> {
        let mut next = Instant::now() + interval;
        loop {
            if duration.is_some_and(|d| start.elapsed() >= d) {
                return Ok(());
            }
            if Instant::now() >= next {
                if !st.frozen {
                    let r = st.sampler.read();
                    st.prev = std::mem::replace(&mut st.cur, r);
                    st.refilter();
                }
                next = Instant::now() + interval;
            }
            term.draw(|f| draw(f, &st)).context("drawing")?;
            let wait = next
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(250));
            if event::poll(wait).context("reading the keyboard")? {
                if let Event::Key(k) = event::read().context("reading the keyboard")? {
                    if k.kind == KeyEventKind::Press && !st.key(k) {
                        return Ok(());
                    }
                }
            }
        }
    })();
    ratatui::try_restore().context("restoring the terminal")?;
    res
}
