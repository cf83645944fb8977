//! Drawing the state: the header (with the link's state), the runs list, a run's node tree and
//! the selected node's detail, the inbox, and the modal boxes (help, a prompt, a confirmation).
//! Only the rows that fit on the screen are built; nothing here walks the whole model.

use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};
use ratatui::Frame;

use octl_proto::state::{ActivityState, Node};
use octl_proto::NodeState;

use super::app::{last_review_tip, App, InboxItem, Modal, Pane, Tab, Typing, View};
use super::detail::Loaded;
use super::keys::KEYS;
use super::model::{self, Attention, RunEntry};
use super::source::Link;
use crate::output::clock;

/// Colours, or none at all under `NO_COLOR` (emphasis that is not colour stays).
struct Paint {
    color: bool,
}

impl Paint {
    fn fg(&self, c: Color) -> Style {
        if self.color {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    }
    fn bold(&self) -> Style {
        Style::default().add_modifier(Modifier::BOLD)
    }
    fn selected(&self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }
    fn attention(&self, a: Attention) -> Style {
        self.fg(match a {
            Attention::Permission
            | Attention::Discussion
            | Attention::Proposal
            | Attention::Input => Color::Yellow,
            Attention::Conflict | Attention::MergeBlocked | Attention::Failed => Color::Red,
            Attention::AwaitingMerge => Color::Cyan,
        })
    }
    fn state(&self, s: NodeState) -> Style {
        self.fg(match s {
            NodeState::Running | NodeState::Starting | NodeState::Merging => Color::Green,
            NodeState::Waiting => Color::Yellow,
            NodeState::Merged | NodeState::Done => Color::Blue,
            NodeState::Failed
            | NodeState::Exited
            | NodeState::Conflict
            | NodeState::MergeBlocked
            | NodeState::Blocked => Color::Red,
            _ => Color::Reset,
        })
    }
}

/// Cuts or pads `s` to `w` columns (counted in chars: ids, states and paths are ASCII).
fn fit(s: &str, w: usize) -> String {
    let n = s.chars().count();
    if n > w {
        let mut t: String = s.chars().take(w.saturating_sub(1)).collect();
        t.push('…');
        t
    } else {
        format!("{s:<w$}")
    }
}

/// Breaks `text` into lines of at most `width` columns at spaces (a word longer than a line
/// is cut), each line after the first starting with `indent`.
fn wrap(text: &str, width: usize, indent: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut line = String::new();
    let width = width.max(indent.chars().count() + 8);
    for word in text.split(' ') {
        let mut word = word.to_string();
        loop {
            let len = line.chars().count();
            let fresh = line.is_empty() || line == indent;
            let sep = usize::from(!fresh);
            if len + sep + word.chars().count() <= width {
                if !fresh {
                    line.push(' ');
                }
                line.push_str(&word);
                break;
            }
            if !fresh {
                out.push(std::mem::replace(&mut line, indent.to_string()));
                continue;
            }
            // A word wider than a whole line: as much of it as fits, the rest on the next.
            let room = width - len;
            let head: String = word.chars().take(room).collect();
            word = word.chars().skip(room).collect();
            line.push_str(&head);
            out.push(std::mem::replace(&mut line, indent.to_string()));
            if word.is_empty() {
                break;
            }
        }
    }
    if (!line.is_empty() && line != indent) || out.is_empty() {
        out.push(line);
    }
    out
}

/// The most rows the status line takes: an error is read whole, the list keeps its room.
const STATUS_ROWS: usize = 4;

pub fn draw(f: &mut Frame, app: &App) {
    let p = Paint { color: app.color };
    let area = f.area();
    let status = app.status.as_ref().map(|s| {
        let mut lines = wrap(&s.text, (area.width as usize).saturating_sub(1), "  ");
        lines.truncate(STATUS_ROWS);
        (s.ok, lines)
    });
    let footer_h = status.as_ref().map_or(1, |(_, l)| l.len()) as u16;
    let rows = Layout::default()
        .direction(Direction::Vertical)
        .constraints([
            Constraint::Length(1),
            Constraint::Min(3),
            Constraint::Length(footer_h),
        ])
        .split(area);
    header(f, app, &p, rows[0]);
    match &app.view {
        View::Runs => runs_list(f, app, &p, rows[1]),
        View::Inbox => inbox(f, app, &p, rows[1]),
        View::Run(id) => match app.runs.get(id) {
            Some(e) => run_view(f, app, &p, e, rows[1]),
            None => f.render_widget(
                Paragraph::new(format!("run {id} is not in the list (any more)")),
                rows[1],
            ),
        },
    }
    footer(f, app, &p, status, rows[2]);
    match &app.modal {
        Some(Modal::Help) => help(f, &p, area),
        Some(Modal::Confirm { action, discard }) => {
            let mut lines = vec![
                Line::from(Span::styled(
                    format!("{}?", action.describe(&app.runs.short)),
                    p.bold(),
                )),
                Line::from(""),
            ];
            let keys = match discard {
                Some(_) => "y: cancel (keeps worktrees and branches) · d: discard too… · n/esc: no",
                None => "y: yes · n/esc: no",
            };
            lines.push(Line::from(keys));
            // Wide enough for the keys on one line where the screen allows; boxed wraps the
            // rest, so no key is ever cut off.
            let w = (keys.chars().count() as u16 + 4).max(64);
            boxed(f, &p, area, "confirm", lines, w);
        }
        Some(Modal::Input { purpose, text }) => prompt(f, &p, area, purpose, text),
        None => {}
    }
}

fn link_text(link: &Link) -> (String, Color) {
    match link {
        Link::Connecting => ("connecting to octld…".into(), Color::Yellow),
        Link::Live => ("● live".into(), Color::Green),
        Link::Reconnecting { since, .. } => (
            format!(
                "reconnecting to octld ({}s): showing the logs on disk, read-only",
                since.elapsed().as_secs()
            ),
            Color::Yellow,
        ),
        Link::Offline { .. } => (
            "octld is not running: read-only from the logs on disk".into(),
            Color::Red,
        ),
    }
}

fn header(f: &mut Frame, app: &App, p: &Paint, area: Rect) {
    let need = app
        .runs
        .order
        .iter()
        .take_while(|id| app.runs.get(id).is_some_and(|e| e.attention.is_some()))
        .count();
    let view = match &app.view {
        View::Runs => "runs".to_string(),
        View::Inbox => format!("inbox ({})", app.inbox.len()),
        View::Run(id) => format!("run {}", app.runs.short.of(id)),
    };
    // Older finished runs are counted, not listed: `run list` has them.
    let older = match app.hidden {
        0 => String::new(),
        n => format!(" (+{n} older)"),
    };
    let left = format!(
        " orchestratectl · {view} · {} runs{older}, {need} need you",
        app.runs.by_id.len()
    );
    let (link, color) = link_text(&app.link);
    let w = area.width as usize;
    let pad = w.saturating_sub(left.chars().count() + link.chars().count() + 1);
    let line = Line::from(vec![
        Span::styled(left, p.bold()),
        Span::raw(" ".repeat(pad)),
        Span::styled(link, p.fg(color).add_modifier(Modifier::BOLD)),
    ]);
    f.render_widget(Paragraph::new(line), area);
}

fn footer(f: &mut Frame, app: &App, p: &Paint, status: Option<(bool, Vec<String>)>, area: Rect) {
    if let Some((ok, lines)) = status {
        let style = p.fg(if ok { Color::Green } else { Color::Red });
        let lines: Vec<Line> = lines
            .into_iter()
            .map(|l| Line::from(Span::styled(format!(" {l}"), style)))
            .collect();
        f.render_widget(Paragraph::new(lines), area);
        return;
    }
    let permission = matches!(
        app.inbox.get(app.sel_item),
        Some(InboxItem::Permission { .. })
    );
    let line = Line::from(match &app.view {
            View::Runs => " enter open · tab inbox · / filter · m merge · x cancel · t attach · ? help · q quit",
            // The keys of the selected item's kind.
            View::Inbox if permission => " y allow · n deny · A allow always · enter open · esc back · ? help",
            View::Inbox => " a answer · y/n accept/reject · m merge · r retry · enter open · esc back · ? help",
            View::Run(_) => " p screen · l log · d diff · e events · t attach · s send · m merge · r retry · esc back · ?",
        });
    f.render_widget(Paragraph::new(line), area);
}

/// The first row shown so that `selected` is on screen.
fn offset(selected: usize, height: usize) -> usize {
    if height == 0 {
        0
    } else {
        selected.saturating_sub(height - 1)
    }
}

/// A row of the runs list: its index in the list, its run, and its cells with their styles.
type ListRow<'a> = (usize, &'a RunEntry, Vec<(String, Style)>);

fn runs_list(f: &mut Frame, app: &App, p: &Paint, area: Rect) {
    let height = area.height.saturating_sub(1) as usize;
    let sel = app
        .sel_run
        .as_ref()
        .and_then(|id| app.visible.iter().position(|v| v == id))
        .unwrap_or(0);
    let first = offset(sel, height);
    let wide = area.width >= 110;
    // Each column's widest value allowed (RUN: an id cut to a prefix no other run has is
    // never cut further).
    let caps: &[(&str, usize)] = if wide {
        &[
            ("NEEDS", 10),
            ("RUN", usize::MAX),
            ("KIND", 11),
            ("STATUS", 9),
            ("NODES", 28),
            ("ELAPSED", 7),
            ("COST", 7),
            ("REPO", 14),
        ]
    } else {
        &[
            ("NEEDS", 10),
            ("RUN", usize::MAX),
            ("STATUS", 9),
            ("NODES", 18),
            ("ELAPSED", 7),
            ("COST", 7),
        ]
    };
    let cell = |e: &RunEntry, name: &str| -> (String, Style) {
        let s = &e.summary;
        match name {
            "NEEDS" => match e.attention {
                Some(a) => (a.label().to_string(), p.attention(a)),
                None => (String::new(), Style::default()),
            },
            "RUN" => (app.runs.short.of(&s.id).to_string(), Style::default()),
            "KIND" => (s.kind_name().to_string(), Style::default()),
            "STATUS" => (s.status.as_str().to_string(), Style::default()),
            "NODES" => (model::counts_cell(s), Style::default()),
            "ELAPSED" => (
                model::run_elapsed_s(s, app.now_ms).map_or("-".into(), clock),
                Style::default(),
            ),
            "COST" => (
                e.cost_usd.map_or("-".into(), |c| format!("${c:.2}")),
                Style::default(),
            ),
            "REPO" => (
                s.repo
                    .as_deref()
                    .map(|r| r.rsplit('/').next().unwrap_or(r).to_string())
                    .unwrap_or_else(|| "-".into()),
                Style::default(),
            ),
            _ => (String::new(), Style::default()),
        }
    };
    // Only the rows on screen are built; each column is as wide as its widest value there,
    // and TITLE gets what is left.
    let rows: Vec<ListRow> = app
        .visible
        .iter()
        .enumerate()
        .skip(first)
        .take(height)
        .filter_map(|(i, id)| app.runs.get(id).map(|e| (i, e)))
        .map(|(i, e)| (i, e, caps.iter().map(|(name, _)| cell(e, name)).collect()))
        .collect();
    let widths: Vec<usize> = caps
        .iter()
        .enumerate()
        .map(|(c, (name, cap))| {
            rows.iter()
                .map(|(_, _, cells)| cells[c].0.chars().count())
                .fold(name.len(), usize::max)
                .min(*cap)
        })
        .collect();
    let title_w = (area.width as usize).saturating_sub(widths.iter().map(|w| w + 1).sum());
    let mut head = String::new();
    for ((name, _), w) in caps.iter().zip(&widths) {
        head.push_str(&fit(name, *w));
        head.push(' ');
    }
    head.push_str("TITLE");
    let mut lines = vec![Line::from(Span::styled(head, p.bold()))];
    if app.visible.is_empty() {
        let text = if !app.loaded {
            "loading the runs…".to_string()
        } else if app.filter.is_empty() {
            "No runs yet. Start one with `orchestratectl spawn code 'a task'`.".to_string()
        } else {
            format!("No run matches {:?} (esc clears the filter).", app.filter)
        };
        lines.push(Line::from(text));
        f.render_widget(Paragraph::new(lines), area);
        return;
    }
    for (i, e, cells) in rows {
        let mut spans = Vec::new();
        for ((text, style), w) in cells.into_iter().zip(&widths) {
            spans.push(Span::styled(fit(&text, *w), style));
            spans.push(Span::raw(" "));
        }
        let mut title = e.summary.title.clone().unwrap_or_default();
        if e.broken.is_some() {
            title = format!("(log unreadable) {title}");
        }
        spans.push(Span::raw(fit(&title, title_w).trim_end().to_string()));
        let mut line = Line::from(spans);
        if i == sel {
            line = line.style(p.selected());
        }
        lines.push(line);
    }
    f.render_widget(Paragraph::new(lines), area);
}

fn activity_text(n: &Node) -> String {
    match &n.activity {
        // Only an alive agent's activity means anything now.
        Some(a) if n.state.is_alive() => match a.state {
            ActivityState::Working => "working",
            ActivityState::NeedsPermission => "needs permission",
            ActivityState::WaitingInput => "waiting input",
            ActivityState::Idle => "idle",
            ActivityState::Unknown => "unknown",
        }
        .to_string(),
        None if n.state.is_alive() => "unknown".to_string(),
        _ => "-".to_string(),
    }
}

/// A best-of-N attempt's place: its rank once judged (`#1 won`), `gated` while it waits
/// for the judge; `None` for other nodes (their activity is shown).
fn attempt_mark(state: &octl_proto::RunState, n: &Node) -> Option<String> {
    state.settings.best_of.as_ref()?;
    if let Some(j) = &state.judged {
        if let Some(i) = j.ranking.iter().position(|r| *r == n.id) {
            return Some(if i == 0 {
                "#1 won".into()
            } else {
                format!("#{}", i + 1)
            });
        }
    }
    n.gated.then(|| "gated".into())
}

fn run_view(f: &mut Frame, app: &App, p: &Paint, e: &RunEntry, area: Rect) {
    let s = &e.summary;
    let rows = Layout::default()
        .direction(Direction::Vertical)
        .constraints([Constraint::Length(2), Constraint::Min(3)])
        .split(area);
    let mut top = format!(
        " {} · {} · {} · {}",
        s.id,
        s.kind_name(),
        s.status,
        s.repo.as_deref().unwrap_or("-")
    );
    if let Some(b) = &s.base {
        top.push_str(&format!(" @ {b}"));
    }
    if let Some(c) = e.cost_usd {
        top.push_str(&format!(" · ${c:.2}"));
    }
    let mut second = format!(" {}", s.title.as_deref().unwrap_or(""));
    if let Some(a) = e.attention {
        second = format!(" needs you: {} ·{second}", a.label());
    }
    f.render_widget(
        Paragraph::new(vec![
            Line::from(Span::styled(top, p.bold())),
            Line::from(Span::styled(
                second,
                e.attention.map_or(Style::default(), |a| p.attention(a)),
            )),
        ]),
        rows[0],
    );
    let left_w = if area.width >= 120 { 64 } else { 44 }.min(area.width * 3 / 5);
    let cols = Layout::default()
        .direction(Direction::Horizontal)
        .constraints([Constraint::Length(left_w), Constraint::Min(20)])
        .split(rows[1]);
    let list_style = if app.pane == Pane::List {
        p.fg(Color::Cyan)
    } else {
        Style::default()
    };
    let title = match e
        .state
        .as_ref()
        .and_then(|s| s.settings.best_of.as_ref().map(|b| (s, b)))
    {
        Some((s, b)) => match &s.judged {
            // `by` is text a client may have written: shown without control characters.
            Some(j) => format!(
                " attempts: {} won ({}) ",
                j.ranking.first().map_or("-", String::as_str),
                octl_proto::text::text_lines(j.by.as_bytes()).join(" ")
            ),
            None if s.judge_failed.is_some() => {
                " attempts: the judge failed, pick one (`pick`) ".into()
            }
            None => format!(" {} attempts, judge {} ", b.attempts, b.judge.as_str()),
        },
        None => " nodes ".into(),
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(list_style)
        .title(title);
    let inner = block.inner(cols[0]);
    f.render_widget(block, cols[0]);
    let Some(state) = &e.state else {
        let why = e
            .broken
            .clone()
            .unwrap_or_else(|| "reading its log…".to_string());
        f.render_widget(Paragraph::new(why).wrap(Wrap { trim: false }), inner);
        return;
    };
    let depths = model::depths(state);
    let wide = inner.width >= 56;
    let sel_id = app.node_in_view().map(|n| n.id.clone()).unwrap_or_default();
    let height = inner.height as usize;
    let sel = state
        .node_order
        .iter()
        .position(|n| *n == sel_id)
        .unwrap_or(0);
    let first = offset(sel, height);
    let mut lines = Vec::new();
    for (i, n) in state.nodes_in_order().enumerate().skip(first).take(height) {
        let depth = depths.get(n.id.as_str()).copied().unwrap_or(0);
        let tree = if depth == 0 {
            n.id.clone()
        } else {
            format!("{}└ {}", "  ".repeat(depth - 1), n.id)
        };
        let stat = match app
            .stats
            .get(&(state.id.clone(), n.id.clone()))
            .and_then(|s| s.value.as_ref())
        {
            Some(Loaded::Numstat { added, removed }) => format!("+{added} -{removed}"),
            _ => "-".into(),
        };
        let elapsed = model::node_elapsed_s(n, app.now_ms).map_or("-".into(), clock);
        let mut spans = vec![
            Span::raw(fit(&tree, if wide { 14 } else { 10 })),
            Span::raw(" "),
            Span::styled(fit(n.state.as_str(), 9), p.state(n.state)),
            Span::raw(" "),
            Span::raw(fit(
                &attempt_mark(state, n).unwrap_or_else(|| activity_text(n)),
                if wide { 13 } else { 7 },
            )),
            Span::raw(" "),
            Span::raw(fit(&elapsed, if wide { 6 } else { 5 })),
            Span::raw(" "),
            Span::styled(stat, p.fg(Color::Green)),
        ];
        if wide {
            spans.push(Span::raw(" "));
            spans.push(Span::raw(n.branch.clone().unwrap_or_default()));
        }
        let mut line = Line::from(spans);
        if i == sel {
            line = line.style(p.selected());
        }
        lines.push(line);
    }
    if state.nodes.is_empty() {
        lines.push(Line::from("no nodes"));
    }
    f.render_widget(Paragraph::new(lines), inner);
    if let Some(n) = app.node_in_view() {
        node_detail(f, app, p, n, cols[1]);
    }
}

fn node_detail(f: &mut Frame, app: &App, p: &Paint, n: &Node, area: Rect) {
    let tabs: Vec<Span> = Tab::ALL
        .iter()
        .flat_map(|t| {
            let style = if *t == app.tab {
                p.bold().add_modifier(Modifier::UNDERLINED)
            } else {
                Style::default()
            };
            [Span::raw(" "), Span::styled(t.title(), style)]
        })
        .collect();
    let border = if app.pane == Pane::Detail {
        p.fg(Color::Cyan)
    } else {
        Style::default()
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(border)
        .title(Line::from(tabs));
    let inner = block.inner(area);
    f.render_widget(block, area);
    let mut lines = Vec::new();
    let mut facts = vec![format!("{} {}", n.id, n.state.as_str())];
    if let Some(b) = &n.branch {
        facts.push(b.clone());
    }
    if !n.deps.is_empty() {
        facts.push(format!("after {}", n.deps.join(", ")));
    }
    lines.push(Line::from(Span::styled(facts.join(" · "), p.bold())));
    if let Some(why) = n.reason.as_deref().or(n.message.as_deref()) {
        lines.push(Line::from(why.to_string()));
    }
    if !n.conflict_files.is_empty() {
        lines.push(Line::from(Span::styled(
            format!("conflicts: {}", n.conflict_files.join(", ")),
            p.fg(Color::Red),
        )));
    }
    // The last review round, and the tip it was made on (`git diff` from it: what changed).
    if let Some(r) = n.reviews.last() {
        let what = match r.way {
            None => "approved".to_string(),
            Some(w) => format!("changes asked ({})", w.as_str()),
        };
        let said = r
            .comments
            .first()
            .and_then(|c| c.lines().next())
            .map(|c| format!(": {c}"))
            .unwrap_or_default();
        let since = r
            .head
            .as_deref()
            .map(|h| format!(" · since {}", &h[..h.len().min(10)]))
            .unwrap_or_default();
        lines.push(Line::from(format!(
            "review {}: {what}{said}{since}",
            r.round
        )));
    }
    if app.tab == Tab::Diff && app.diff_since {
        if let Some(tip) = last_review_tip(n) {
            lines.push(Line::from(Span::styled(
                format!(
                    "since review {} (at {tip:.10}) · d: against the merge base",
                    n.reviews.len()
                ),
                p.fg(Color::Yellow),
            )));
        }
    }
    match &app.detail {
        None => lines.push(Line::from("loading…")),
        Some(Loaded::Unavailable(why)) => lines.push(Line::from(format!("unavailable: {why}"))),
        Some(Loaded::Numstat { .. }) => {}
        Some(Loaded::Lines(text)) if text.is_empty() => lines.push(Line::from("(empty)")),
        Some(Loaded::Lines(text)) => {
            let room = (inner.height as usize).saturating_sub(lines.len());
            // The end is what is new (screen, log, events); a diff is read from its start,
            // scrolled to keep its line cursor in sight.
            let cursor = (app.tab == Tab::Diff && app.pane == Pane::Detail).then_some(app.diff_at);
            let start = match (app.tab, cursor) {
                (Tab::Diff, Some(at)) => offset(at, room),
                (Tab::Diff, None) => 0,
                _ => text.len().saturating_sub(room),
            };
            for (i, l) in text.iter().enumerate().skip(start).take(room) {
                let style = if app.tab == Tab::Diff {
                    if l.starts_with("+++") || l.starts_with("---") || l.starts_with("diff ") {
                        p.bold()
                    } else if l.starts_with('+') {
                        p.fg(Color::Green)
                    } else if l.starts_with('-') {
                        p.fg(Color::Red)
                    } else if l.starts_with("@@") {
                        p.fg(Color::Cyan)
                    } else {
                        Style::default()
                    }
                } else {
                    Style::default()
                };
                let mut line = Line::from(Span::styled(l.clone(), style));
                if cursor == Some(i) {
                    line = line.style(p.selected());
                }
                lines.push(line);
            }
        }
    }
    f.render_widget(Paragraph::new(lines), inner);
}

/// Where an inbox item's text starts: after its kind (10 columns: `permission`) and a space.
const INBOX_INDENT: &str = "           ";
/// The width of the inbox's kinds column.
const INBOX_KIND: usize = INBOX_INDENT.len() - 1;

fn inbox(f: &mut Frame, app: &App, p: &Paint, area: Rect) {
    let mut lines = Vec::new();
    if app.inbox.is_empty() {
        lines.push(Line::from(
            " Nothing waits for you: no permission, question, proposal, conflict or merge.",
        ));
        f.render_widget(Paragraph::new(lines), area);
        return;
    }
    for (i, item) in app.inbox.iter().enumerate() {
        let short = app.runs.short.of(item.run());
        let (kind, style, head, body) = match item {
            // The tool on the item's line, its whole input under it (the selected item's).
            InboxItem::Permission {
                node,
                request,
                tool,
                input,
                ..
            } => (
                "permission",
                p.attention(Attention::Permission),
                format!("{short}/{node} {tool} ({request})"),
                Some(input.join("\n")),
            ),
            InboxItem::Question { d, .. } => (
                "question",
                p.attention(Attention::Discussion),
                format!("{short}/{} {}", d.node.as_deref().unwrap_or("-"), d.title),
                d.body.clone(),
            ),
            InboxItem::Proposal { s, .. } => (
                "proposal",
                p.attention(Attention::Input),
                format!("{short}/{} {}", s.node.as_deref().unwrap_or("-"), s.task),
                s.why.clone().map(|w| format!("why: {w}")),
            ),
            InboxItem::Merge {
                node, state, files, ..
            } => (
                "merge",
                if state == "awaiting merge" {
                    p.attention(Attention::AwaitingMerge)
                } else {
                    p.attention(Attention::Conflict)
                },
                format!(
                    "{short}/{} {state}",
                    node.as_deref().unwrap_or("integration")
                ),
                (!files.is_empty()).then(|| format!("files: {}", files.join(", "))),
            ),
        };
        // Wrapped here, not by the paragraph: a wrapped line keeps the item's indent, so the
        // kinds column stays clear.
        let width = area.width as usize;
        let selected = i == app.sel_item;
        let mut head_rows = wrap(&head, width.saturating_sub(INBOX_INDENT.len()), "").into_iter();
        let mut line = Line::from(vec![
            Span::styled(fit(kind, INBOX_KIND), style),
            Span::raw(" "),
            Span::raw(head_rows.next().unwrap_or_default()),
        ]);
        if selected {
            line = line.style(p.selected());
        }
        lines.push(line);
        for rest in head_rows {
            let mut l = Line::from(format!("{INBOX_INDENT}{rest}"));
            if selected {
                l = l.style(p.selected());
            }
            lines.push(l);
        }
        if selected {
            let indented = |text: &str| {
                wrap(text, width.saturating_sub(INBOX_INDENT.len()), "")
                    .into_iter()
                    .map(|l| format!("{INBOX_INDENT}{l}"))
                    .collect::<Vec<_>>()
            };
            for l in body.iter().flat_map(|b| b.lines()) {
                lines.extend(indented(l).into_iter().map(Line::from));
            }
            let next = format!("next: {}", item.next_step());
            lines.extend(
                indented(&next)
                    .into_iter()
                    .map(|l| Line::from(Span::styled(l, p.bold()))),
            );
        }
    }
    let sel_line = lines
        .iter()
        .position(|l| l.style.add_modifier.contains(Modifier::REVERSED))
        .unwrap_or(0);
    let first = offset(sel_line + 2, area.height as usize);
    f.render_widget(
        Paragraph::new(lines.into_iter().skip(first).collect::<Vec<_>>()),
        area,
    );
}

fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}

/// A box of `lines` in the middle of `area`, at most `w` wide (less on a narrow screen) and as
/// tall as its lines once wrapped: a line wider than the box is broken at spaces (in its first
/// span's style) rather than cut, so what the box says is all there.
fn boxed(f: &mut Frame, p: &Paint, area: Rect, title: &str, lines: Vec<Line>, w: u16) {
    let w = w.min(area.width.saturating_sub(2)).max(12);
    let inner = w.saturating_sub(2) as usize;
    let lines: Vec<Line> = lines
        .into_iter()
        .flat_map(|line| {
            if line.width() <= inner {
                return vec![line];
            }
            let style = line.spans.first().map_or(line.style, |s| s.style);
            let plain: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
            wrap(&plain, inner, "")
                .into_iter()
                .map(|l| Line::from(Span::styled(l, style)))
                .collect()
        })
        .collect();
    let h = lines.len() as u16 + 2;
    let r = centered(area, w, h);
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(p.fg(Color::Yellow))
                .title(format!(" {title} ")),
        ),
        r,
    );
}

fn help(f: &mut Frame, p: &Paint, area: Rect) {
    let lines: Vec<Line> = KEYS
        .iter()
        .map(|(k, _, what)| {
            Line::from(vec![
                Span::styled(fit(k, 8), p.bold()),
                Span::raw(" "),
                Span::raw(*what),
            ])
        })
        .collect();
    boxed(f, p, area, "keys (esc closes)", lines, 62);
}

fn prompt(f: &mut Frame, p: &Paint, area: Rect, purpose: &Typing, text: &str) {
    let (title, what) = match purpose {
        Typing::Filter => {
            // The filter is typed on the footer line, the list filtering as one types.
            let r = Rect {
                y: area.y + area.height.saturating_sub(1),
                height: 1,
                ..area
            };
            f.render_widget(Clear, r);
            f.render_widget(Paragraph::new(format!("/{text}█")), r);
            return;
        }
        Typing::Answer { question, .. } => ("answer", question.clone()),
        Typing::Reject { .. } => ("reject: why?", "the reason goes to the agent's run".into()),
        // An empty reason denies without one.
        Typing::Deny { request, node, .. } => (
            "deny: why? (optional)",
            format!("the agent of node {node} is told why request {request} is denied (empty: no reason)"),
        ),
        Typing::Send { node, .. } => ("send a line", format!("to the agent of node {node}")),
        Typing::Review { node, .. } => (
            "review: what should change? (`src/x.rs:42: use the helper`)",
            format!("sent to the agent of node {node} as its next message; it reports done again"),
        ),
    };
    let lines = vec![
        Line::from(what),
        Line::from(""),
        Line::from(Span::styled(format!("> {text}█"), p.bold())),
        Line::from(match purpose {
            Typing::Deny { .. } => "enter: deny · esc: cancel",
            _ => "enter: send · esc: cancel",
        }),
    ];
    boxed(f, p, area, title, lines, 70);
}
