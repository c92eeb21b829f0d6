//! The screen of `mpiq watch` (ratatui): the header, the list of ranks with
//! their histories, or one rank's stacks and queues; the legend, the keys
//! and the last message. Drawing only: what it shows is in [`View`] and the
//! [`Session`].

use std::time::Duration;

use mpiq::analysis::Verdict;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::model::{Cell, Key, Row, Session, LEGEND};

/// What the list or the detail shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every rank (or group).
    List,
    /// One rank's stacks and queues, scrolled by `scroll` lines.
    Detail {
        /// The rank.
        key: Key,
        /// The first line shown.
        scroll: u16,
    },
}

/// A replay's state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replaying {
    /// Samples in the file.
    pub total: usize,
    /// Whether it plays (one sample every interval).
    pub playing: bool,
}

/// Everything the screen shows that is not in the session.
#[derive(Debug)]
pub struct View {
    /// What is being watched ("mpirun 4200", "replay of s.rec").
    pub title: String,
    /// The list or a rank.
    pub mode: Mode,
    /// The row selected in the list.
    pub selected: usize,
    /// Its first rank, to keep it selected across samples.
    pub selected_key: Option<Key>,
    /// The first row shown.
    pub top: usize,
    /// The sample shown (0-based); live: the newest.
    pub at: usize,
    /// Sampling paused.
    pub paused: bool,
    /// A sample is being taken.
    pub sampling: bool,
    /// Time between samples.
    pub interval: Duration,
    /// With --replay.
    pub replay: Option<Replaying>,
    /// The last message (a warning, a failed sample).
    pub status: String,
    /// The rows of the last list drawn (what the keys move over).
    pub rows: Vec<Row>,
    /// The detail text of (sample number, rank), kept while they stay.
    detail: Option<(usize, Key, String)>,
}

impl View {
    /// A view of nothing yet.
    pub fn new(title: String, interval: Duration, replay: Option<Replaying>) -> View {
        View {
            title,
            mode: Mode::List,
            selected: 0,
            selected_key: None,
            top: 0,
            at: 0,
            paused: false,
            sampling: false,
            interval,
            replay,
            status: String::new(),
            rows: Vec::new(),
            detail: None,
        }
    }
}

/// `HH:MM:SS UTC` of a time in ms since the epoch.
fn clock(ms: u64) -> String {
    let s = ms / 1000 % 86_400;
    format!("{:02}:{:02}:{:02} UTC", s / 3600, s / 60 % 60, s % 60)
}

fn letter_style(c: char) -> Style {
    let color = match c {
        '.' => Color::Green,
        'b' => Color::Yellow,
        'S' | 'R' | 'W' | 'T' => Color::Cyan,
        'C' => Color::Magenta,
        '?' => Color::Red,
        '*' => Color::White,
        _ => Color::Gray,
    };
    Style::default().fg(color)
}

fn fit(text: &str, width: usize) -> String {
    let n = text.chars().count();
    if n <= width {
        return format!("{text:<width$}");
    }
    let mut s: String = text.chars().take(width.saturating_sub(1)).collect();
    s.push('~');
    s
}

/// `text` in at most `width` columns, cut at the end with `~`.
fn fit_right(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    fit(text, width)
}

/// Draws the whole screen.
pub fn draw(f: &mut Frame, session: &Session, view: &mut View, opts: &mpiq::DumpOptions) {
    let [header, body, legend, help, status] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(1),
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(f.area());
    draw_header(f, header, session, view);
    match view.mode.clone() {
        Mode::List => {
            draw_list(f, body, session, view);
            f.render_widget(
                Paragraph::new(format!(" {LEGEND}")).style(Style::default().fg(Color::DarkGray)),
                legend,
            );
        }
        Mode::Detail { key, scroll } => draw_detail(f, body.union(legend), session, view, key, scroll, opts),
    }
    let keys = match (&view.mode, &view.replay) {
        (Mode::Detail { .. }, _) => " up/down PgUp/PgDn scroll   Esc/Backspace back   q quit",
        (Mode::List, Some(_)) => {
            " up/down j/k select   Enter stacks+queues   left/right step   p/space play/pause   q quit"
        }
        (Mode::List, None) => {
            " up/down j/k select   Enter stacks+queues   r/space sample now   p pause/resume   q quit"
        }
    };
    f.render_widget(
        Paragraph::new(keys).style(Style::default().add_modifier(Modifier::REVERSED)),
        help,
    );
    f.render_widget(
        Paragraph::new(format!(" {}", view.status)).style(Style::default().fg(Color::Yellow)),
        status,
    );
}

fn draw_header(f: &mut Frame, area: Rect, session: &Session, view: &View) {
    let sample = session.sample(view.at);
    let mut first = format!(" mpiq watch  {}", view.title);
    match sample {
        Some(s) => {
            first.push_str(&format!("   sample {}", s.number));
            if let Some(r) = &view.replay {
                first.push_str(&format!(" of {}", r.total));
            }
            if s.time_ms > 0 {
                first.push_str(&format!(" at {}", clock(s.time_ms)));
            }
            if let Some(ms) = s.took_ms {
                first.push_str(&format!(" (took {ms} ms)"));
            }
            let ranks = s.snapshot.processes.len();
            first.push_str(&format!("   {ranks} rank{}", if ranks == 1 { "" } else { "s" }));
        }
        None => first.push_str("   no sample yet"),
    }
    first.push_str(&format!("   every {:.1?}", view.interval));
    if let Some(r) = view.replay.as_ref().filter(|r| session.len() < r.total) {
        first.push_str(&format!("   [replaying: {} of {} read]", session.len(), r.total));
    }
    let flags = match (&view.replay, view.paused, view.sampling) {
        (Some(r), ..) if r.playing => "   [playing]",
        (Some(_), ..) => "",
        (None, true, _) => "   [PAUSED]",
        (None, false, true) => "   [sampling...]",
        (None, false, false) => "",
    };
    first.push_str(flags);
    let (verdict, style) = match sample.map(|s| (&s.analysis.verdict, &s.analysis.summary, &s.hang)) {
        Some((v, summary, hang)) => {
            use mpiq::analysis::hang::duration_words;
            let still = match (hang.hung, hang.still_ms) {
                (true, ms) => format!("HUNG: nothing changed for {}; ", duration_words(ms)),
                (false, 0) => String::new(),
                (false, ms) => format!(
                    "[nothing changed for {}; hung after {}] ",
                    duration_words(ms),
                    duration_words(hang.threshold_ms)
                ),
            };
            (
                format!(" verdict: {still}{summary}"),
                Style::default().add_modifier(Modifier::BOLD).fg(match v {
                    _ if hang.hung => Color::Red,
                    Verdict::Deadlock => Color::Red,
                    Verdict::NoDeadlock => Color::Green,
                    Verdict::Unknown => Color::Yellow,
                }),
            )
        }
        None => (" verdict: (waiting for the first sample)".into(), Style::default()),
    };
    f.render_widget(
        Paragraph::new(vec![
            Line::from(Span::styled(first, Style::default().add_modifier(Modifier::BOLD))),
            Line::from(Span::styled(verdict, style)),
        ]),
        area,
    );
}

/// The width of the column of how long a rank has been where it is.
const FOR_WIDTH: usize = 9;

/// How long a row has been where it is, short: `850ms`, `42s`, `4m10s`.
fn for_text(ms: Option<u64>) -> String {
    let Some(ms) = ms else { return String::new() };
    let s = ms / 1000;
    match s {
        0 => format!("{ms}ms"),
        1..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

/// A row's where line as shown: `» ` first for the ranks the others wait
/// for.
fn where_shown(r: &Row) -> String {
    if r.waited_on {
        format!("» {}", r.where_)
    } else {
        r.where_.clone()
    }
}

/// Column widths: who, pid, where, history.
fn columns(rows: &[Row], width: usize) -> (usize, usize, usize, usize) {
    let who = rows
        .iter()
        .map(|r| r.who.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(4, 40);
    let pid = rows.iter().map(|r| r.pid.chars().count()).max().unwrap_or(0).max(3);
    let fixed = 2 + who + 1 + pid + 2 + FOR_WIDTH + 2 + 2;
    let want = rows
        .iter()
        .map(|r| where_shown(r).chars().count())
        .max()
        .unwrap_or(0)
        .max(5);
    let room = width.saturating_sub(fixed);
    let where_ = want.min(room.saturating_sub(12).max(room / 2));
    (who, pid, where_, room.saturating_sub(where_))
}

fn draw_list(f: &mut Frame, area: Rect, session: &Session, view: &mut View) {
    let max_rows = usize::from(area.height.saturating_sub(1)).max(1);
    let mut rows = session.rows(view.at, usize::from(area.width), max_rows);
    let (who_w, pid_w, where_w, strip_w) = columns(&rows, usize::from(area.width));
    for r in &mut rows {
        let n = r.strip.len();
        r.strip.drain(..n.saturating_sub(strip_w));
    }
    // Keep the same rank selected as the rows change.
    if let Some(k) = view.selected_key {
        if let Some(i) = rows.iter().position(|r| r.keys.contains(&k)) {
            view.selected = i;
        }
    }
    view.selected = view.selected.min(rows.len().saturating_sub(1));
    view.selected_key = rows.get(view.selected).and_then(|r| r.keys.first().copied());
    if view.selected < view.top {
        view.top = view.selected;
    } else if view.selected >= view.top + max_rows {
        view.top = view.selected + 1 - max_rows;
    }
    let grouped = rows.iter().any(|r| r.keys.len() > 1);
    let title = format!(
        "  {:>who_w$} {:>pid_w$}  {:>FOR_WIDTH$}  {}  history (newest right)",
        if grouped { "ranks" } else { "rank" },
        if grouped { "" } else { "pid" },
        "for",
        fit("where", where_w),
    );
    let mut lines = vec![Line::from(Span::styled(
        title,
        Style::default().add_modifier(Modifier::UNDERLINED),
    ))];
    for (i, r) in rows.iter().enumerate().skip(view.top).take(max_rows) {
        let mark = if i == view.selected { "> " } else { "  " };
        let base = if i == view.selected {
            Style::default().bg(Color::Blue)
        } else {
            Style::default()
        };
        let where_style = if r.changed {
            base.add_modifier(Modifier::BOLD | Modifier::REVERSED)
        } else {
            base
        };
        let mut spans = vec![
            Span::styled(
                format!(
                    "{mark}{:>who_w$} {:>pid_w$}  {:>FOR_WIDTH$}  ",
                    fit_right(&r.who, who_w),
                    r.pid,
                    for_text(r.still_ms)
                ),
                base,
            ),
            Span::styled(fit(&where_shown(r), where_w), where_style),
            Span::styled("  ", base),
        ];
        spans.extend(r.strip.iter().map(|c: &Cell| {
            let mut s = letter_style(c.letter);
            if c.changed {
                s = s.add_modifier(Modifier::BOLD | Modifier::REVERSED);
            }
            Span::styled(c.letter.to_string(), s)
        }));
        lines.push(Line::from(spans));
    }
    f.render_widget(Paragraph::new(lines), area);
    view.rows = rows;
}

fn draw_detail(
    f: &mut Frame,
    area: Rect,
    session: &Session,
    view: &mut View,
    key: Key,
    scroll: u16,
    opts: &mpiq::DumpOptions,
) {
    let Some(sample) = session.sample(view.at) else { return };
    let fresh = matches!(&view.detail, Some((n, k, _)) if *n == sample.number && *k == key);
    if !fresh {
        let text = sample
            .detail_text(key, opts)
            .unwrap_or_else(|| "(this rank is not in this sample)\n".into());
        view.detail = Some((sample.number, key, text));
    }
    let text = view.detail.as_ref().map(|d| d.2.as_str()).unwrap_or_default();
    let who = match key {
        Key::Rank(r) => format!("rank {r}"),
        Key::Pid(p) => format!("pid {p}"),
        Key::Index(i) => format!("process #{i}"),
    };
    let title = format!(
        " {who}: every thread's frames and the queues, sample {} ({} lines)",
        sample.number,
        text.lines().count()
    );
    let [top, rest] = Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(area);
    f.render_widget(
        Paragraph::new(title).style(Style::default().add_modifier(Modifier::UNDERLINED)),
        top,
    );
    f.render_widget(Paragraph::new(text).scroll((scroll, 0)), rest);
}

/// The screen as text, drawn on ratatui's `TestBackend` (`width` x
/// `height`): for tests and the benchmark (`mpiq-bench watch`).
pub fn draw_text(
    session: &Session,
    view: &mut View,
    opts: &mpiq::DumpOptions,
    width: u16,
    height: u16,
) -> std::io::Result<Vec<String>> {
    let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(width, height))
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    t.draw(|f| draw(f, session, view, opts))
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let buf = t.backend().buffer();
    Ok((0..height)
        .map(|y| (0..width).map(|x| buf[(x, y)].symbol()).collect::<String>())
        .collect())
}
