//! Each view drawn on ratatui's test backend, asserting on the buffer: who needs you comes
//! first, the tree keeps plan order and shows deps, NO_COLOR draws no colour, 80×24 fits.

use octl_proto::event::{Actor, Event};
use octl_proto::projection::RunSummary;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::Color;
use ratatui::Terminal;
use serde_json::{json, Value};

use octl_proto::rpc::PermissionBehavior;

use super::actions::Action;
use super::app::{App, Effect, InboxItem, View};
use super::keys::Cmd;
use super::source::{Link, Request, Update, READ_ONLY};
use super::views;

const A: &str = "01JDXJ5R8A4M0ZK7P2W9TB3C6A";
const B: &str = "01JDXJ5R8B4M0ZK7P2W9TB3C6B";
const C: &str = "01JDXJ5R8C4M0ZK7P2W9TB3C6C";
const D: &str = "01JDXJ5R8D4M0ZK7P2W9TB3C6D";

fn summary(id: &str, kind: &str, status: &str, nodes: Value) -> RunSummary {
    serde_json::from_value(json!({
        "id": id, "kind": kind, "status": status, "title": format!("title {}", &id[25..]),
        "repo": "/src/app", "base": "main", "created_at": "2026-11-30T10:00:00.000Z",
        "updated_at": "2026-11-30T10:05:00.000Z", "nodes": nodes, "last_seq": 0
    }))
    .unwrap()
}

fn ev(run: &str, seq: u64, node: Option<&str>, t: &str, data: Value) -> Event {
    Event {
        v: 1,
        seq,
        id: format!("01JDXK00000000000000000{seq:03}"),
        ts: format!("2026-11-30T10:00:{:02}.000Z", seq % 60),
        run: run.into(),
        node: node.map(str::to_string),
        kind: t.into(),
        actor: Actor::Human,
        data: data.as_object().unwrap().clone(),
        idempotency_key: None,
    }
}

fn text(buf: &Buffer) -> String {
    let area = buf.area;
    let mut out = String::new();
    for y in 0..area.height {
        for x in 0..area.width {
            out.push_str(buf[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

fn draw(app: &App, w: u16, h: u16) -> Buffer {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    term.draw(|f| views::draw(f, app)).unwrap();
    term.backend().buffer().clone()
}

fn app(color: bool) -> App {
    let mut a = App::new(color, "/h/tmux.sock".into());
    a.update(Update::Link(Link::Live));
    a.now_ms = octl_proto::time::parse_millis("2026-11-30T10:10:00.000Z").unwrap();
    a
}

/// Four runs: one active, one completed, one failed, one waiting on a conflict.
fn four_runs(a: &mut App) {
    a.update(Update::Summaries(vec![
        summary(A, "spinoff", "active", json!({"running": 1})),
        summary(B, "spinoff", "completed", json!({"merged": 1})),
        summary(C, "fanout", "failed", json!({"failed": 2})),
        summary(D, "spinoff", "waiting", json!({"conflict": 1})),
    ]));
}

/// The row of a run, by its title (`title X`, X its id's last letter, as [`summary`] makes it).
fn row_of(screen: &str, id: &str) -> usize {
    let title = format!("title {}", &id[25..]);
    screen
        .lines()
        .position(|l| l.contains(&title) || (l.contains(&id[..8]) && l.contains("asks")))
        .unwrap_or_else(|| panic!("{id} not on screen:\n{screen}"))
}

#[test]
fn the_runs_that_need_you_come_first_most_urgent_first() {
    let mut a = app(true);
    four_runs(&mut a);
    let screen = text(&draw(&a, 80, 24));
    let (d, c, ac, b) = (
        row_of(&screen, D),
        row_of(&screen, C),
        row_of(&screen, A),
        row_of(&screen, B),
    );
    assert!(
        d < c && c < ac && ac < b,
        "conflict, failed, active, ended:\n{screen}"
    );
    assert!(
        screen.lines().nth(d).unwrap().starts_with("conflict"),
        "{screen}"
    );
    assert!(
        screen.lines().nth(c).unwrap().starts_with("failed"),
        "{screen}"
    );
    assert!(
        screen.contains("2 runs need you") || screen.contains("2 need you"),
        "{screen}"
    );
    // A question outranks a conflict once it is known from the log.
    let mut q = app(true);
    q.update(Update::Summaries(vec![summary(
        D,
        "generic",
        "active",
        json!({}),
    )]));
    q.update(Update::Events(vec![
        ev(
            D,
            1,
            None,
            "run.created",
            json!({"kind": "generic", "title": "asks"}),
        ),
        ev(D, 2, Some("a"), "node.added", json!({})),
        ev(
            D,
            3,
            None,
            "discussion.opened",
            json!({"id": "q1", "node": "a", "title": "Which colour?"}),
        ),
    ]));
    let screen = text(&draw(&q, 80, 24));
    assert!(
        screen
            .lines()
            .nth(row_of(&screen, D))
            .unwrap()
            .starts_with("question"),
        "{screen}"
    );
}

#[test]
fn the_list_fits_80_by_24_and_wide_screens_show_more() {
    let mut a = app(true);
    four_runs(&mut a);
    let screen = text(&draw(&a, 80, 24));
    let lines: Vec<&str> = screen.lines().collect();
    assert_eq!(lines.len(), 24);
    assert!(
        lines[0].contains("orchestratectl") && lines[0].contains("● live"),
        "{screen}"
    );
    assert!(
        lines[1].starts_with("NEEDS") && lines[1].contains("COST"),
        "{screen}"
    );
    assert!(
        lines[23].contains("? help"),
        "the keys are on the last line:\n{screen}"
    );
    assert!(
        !lines[1].contains("REPO"),
        "80 columns leave the repo out:\n{screen}"
    );
    let wide = text(&draw(&a, 140, 30));
    assert!(wide.lines().nth(1).unwrap().contains("REPO"), "{wide}");
    // Resizing down again draws it whole.
    let small = text(&draw(&a, 80, 24));
    assert_eq!(small, screen);
}

#[test]
fn no_color_draws_no_colour() {
    let mut a = app(false);
    four_runs(&mut a);
    let buf = draw(&a, 80, 24);
    for cell in buf.content() {
        assert_eq!(
            cell.fg,
            Color::Reset,
            "a coloured cell under NO_COLOR: {cell:?}"
        );
        assert_eq!(cell.bg, Color::Reset);
    }
    let mut c = app(true);
    four_runs(&mut c);
    let buf = draw(&c, 80, 24);
    assert!(
        buf.content().iter().any(|c| c.fg == Color::Red),
        "conflict is red with colour"
    );
}

/// An orchestrate-like DAG folded from a log: plan order kept, deps indented and named.
fn dag_app() -> App {
    let mut a = app(true);
    a.update(Update::Summaries(vec![summary(
        A,
        "generic",
        "active",
        json!({}),
    )]));
    a.update(Update::Events(vec![
        ev(
            A,
            1,
            None,
            "run.created",
            json!({"kind": "generic", "title": "dag"}),
        ),
        ev(A, 2, Some("schema"), "node.added", json!({})),
        ev(A, 3, Some("api"), "node.added", json!({"deps": ["schema"]})),
        ev(A, 4, Some("ui"), "node.added", json!({"deps": ["api"]})),
        ev(A, 5, Some("docs"), "node.added", json!({})),
        ev(A, 6, Some("schema"), "node.done", json!({})),
        ev(
            A,
            7,
            Some("api"),
            "node.progress",
            json!({"message": "half"}),
        ),
    ]));
    a.key(Some(Cmd::Open), None);
    a
}

#[test]
fn the_node_tree_keeps_plan_order_with_deps_under_their_parents() {
    let a = dag_app();
    assert_eq!(a.view, View::Run(A.to_string()));
    let screen = text(&draw(&a, 80, 24));
    let row = |id: &str| {
        screen
            .lines()
            .position(|l| l.contains(&format!("│{id} ")) || l.contains(&format!("└ {id} ")))
            .unwrap_or_else(|| panic!("{id} not in the tree:\n{screen}"))
    };
    assert!(
        row("schema") < row("api") && row("api") < row("ui") && row("ui") < row("docs"),
        "{screen}"
    );
    let api = screen.lines().nth(row("api")).unwrap();
    assert!(api.contains("└ api") && api.contains("running"), "{screen}");
    let ui = screen.lines().nth(row("ui")).unwrap();
    assert!(ui.contains("  └ ui"), "ui is under api:\n{screen}");
    // A generic node's agent is not ours: no activity is claimed for it but unknown.
    assert!(api.contains("unknown"), "{screen}");
    assert!(
        screen.contains("screen") && screen.contains("diff"),
        "the detail tabs:\n{screen}"
    );
}

#[test]
fn moving_in_the_tree_asks_for_the_selected_nodes_detail() {
    let mut a = dag_app();
    let effects = a.key(Some(Cmd::Down), None);
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::Request(Request::Load(l)) if l.node() == (A, "api"))),
        "{effects:?}"
    );
    let effects = a.key(Some(Cmd::Log), None);
    assert!(
        effects.iter().any(|e| matches!(e, Effect::Request(Request::Load(super::detail::Load::Log { node, .. })) if node == "api")),
        "{effects:?}"
    );
}

#[test]
fn the_inbox_shows_the_question_inline_and_answers_it() {
    let mut a = app(true);
    a.update(Update::Summaries(vec![summary(
        A,
        "generic",
        "active",
        json!({}),
    )]));
    a.update(Update::Events(vec![
        ev(A, 1, None, "run.created", json!({"kind": "generic"})),
        ev(A, 2, Some("a"), "node.added", json!({})),
        ev(
            A,
            3,
            None,
            "discussion.opened",
            json!({"id": "q1", "node": "a", "title": "Which colour?", "body": "blue or green"}),
        ),
        ev(
            A,
            4,
            None,
            "spinoff.proposed",
            json!({"id": "p1", "node": "a", "task": "fix the docs", "why": "separate"}),
        ),
    ]));
    a.key(Some(Cmd::Inbox), None);
    let screen = text(&draw(&a, 80, 24));
    assert!(
        screen.contains("question") && screen.contains("Which colour?"),
        "{screen}"
    );
    assert!(
        screen.contains("blue or green"),
        "the context, inline:\n{screen}"
    );
    assert!(
        screen.contains("proposal") && screen.contains("fix the docs"),
        "{screen}"
    );
    assert!(screen.contains("next: a: answer"), "{screen}");
    a.key(Some(Cmd::Answer), Some('a'));
    for c in "green".chars() {
        a.key(None, Some(c));
    }
    let screen = text(&draw(&a, 80, 24));
    assert!(screen.contains("> green"), "{screen}");
    let effects = a.key(Some(Cmd::Open), None);
    assert_eq!(
        effects,
        [Effect::Request(Request::Act(
            super::actions::Action::Answer {
                id: "q1".into(),
                text: "green".into()
            }
        ))]
    );
    // The proposal: y accepts at once.
    a.key(Some(Cmd::Down), None);
    let effects = a.key(Some(Cmd::Accept), Some('y'));
    assert_eq!(
        effects,
        [Effect::Request(Request::Act(
            super::actions::Action::Accept { id: "p1".into() }
        ))]
    );
}

#[test]
fn destroying_asks_and_discard_asks_twice() {
    let mut a = app(true);
    four_runs(&mut a);
    assert!(a.key(Some(Cmd::Cancel), Some('x')).is_empty());
    let screen = text(&draw(&a, 80, 24));
    assert!(
        screen.contains("cancel run") && screen.contains("d: discard too"),
        "{screen}"
    );
    assert!(a.key(None, Some('d')).is_empty(), "discard asks once more");
    let screen = text(&draw(&a, 80, 24));
    assert!(screen.contains("DISCARD"), "{screen}");
    let effects = a.key(None, Some('y'));
    assert!(
        matches!(
            &effects[..],
            [Effect::Request(Request::Act(
                super::actions::Action::Cancel { discard: true, .. }
            ))]
        ),
        "{effects:?}"
    );
    // Anything but y says no.
    a.key(Some(Cmd::Merge), Some('m'));
    assert!(a.key(None, Some('n')).is_empty());
    assert_eq!(a.status.as_ref().unwrap().text, "nothing done");
}

#[test]
fn the_link_is_shown_honestly() {
    let mut a = app(true);
    four_runs(&mut a);
    a.update(Update::Link(Link::Offline {
        why: "no socket".into(),
    }));
    let screen = text(&draw(&a, 80, 24));
    assert!(
        screen.lines().next().unwrap().contains("read-only"),
        "{screen}"
    );
    a.update(Update::Link(Link::Reconnecting {
        since: std::time::Instant::now(),
        why: "x".into(),
    }));
    let screen = text(&draw(&a, 100, 24));
    assert!(
        screen.lines().next().unwrap().contains("reconnecting"),
        "{screen}"
    );
    // Before the first answer the list says it is loading, not that there are no runs.
    let fresh = App::new(true, "/h/tmux.sock".into());
    let screen = text(&draw(&fresh, 80, 24));
    assert!(
        screen.contains("loading the runs") && screen.contains("connecting"),
        "{screen}"
    );
}

#[test]
fn a_fold_that_does_not_fit_is_read_again() {
    let mut a = app(true);
    a.update(Update::Summaries(vec![summary(
        A,
        "generic",
        "active",
        json!({}),
    )]));
    let effects = a.update(Update::Events(vec![ev(
        A,
        3,
        Some("a"),
        "node.done",
        json!({}),
    )]));
    assert_eq!(effects, [Effect::Request(Request::Refold(A.into()))]);
}

#[test]
fn help_lists_every_key() {
    let mut a = app(true);
    a.key(Some(Cmd::Help), Some('?'));
    let screen = text(&draw(&a, 80, 30));
    for (k, _, _) in super::keys::KEYS {
        assert!(screen.contains(k), "{k} missing from help:\n{screen}");
    }
}

#[test]
fn the_bell_rings_once_when_a_live_run_starts_needing_a_human_and_never_for_history() {
    let created = |run| {
        vec![
            ev(run, 1, None, "run.created", json!({"kind": "generic"})),
            ev(run, 2, Some("a"), "node.added", json!({})),
        ]
    };
    let asked = |run, seq| {
        ev(
            run,
            seq,
            None,
            "discussion.opened",
            json!({"id": format!("q{seq}"), "node": "a", "title": "Which colour?"}),
        )
    };
    let bells = |effects: &[Effect]| effects.iter().filter(|e| **e == Effect::Bell).count();
    let mut a = app(true);
    a.update(Update::Summaries(vec![
        summary(A, "generic", "active", json!({})),
        summary(B, "generic", "active", json!({})),
    ]));
    // A log read back (the first load): a question already open rings nothing.
    let mut history = created(A);
    history.push(asked(A, 3));
    assert_eq!(bells(&a.update(Update::Events(history))), 0);
    // From the feed: B starts needing a human, once; a second question changes nothing.
    assert_eq!(bells(&a.update(Update::Live(created(B)))), 0);
    assert_eq!(bells(&a.update(Update::Live(vec![asked(B, 3)]))), 1);
    assert_eq!(bells(&a.update(Update::Live(vec![asked(B, 4)]))), 0);
}

#[test]
fn a_long_error_is_shown_whole_at_80_columns() {
    let mut a = app(true);
    four_runs(&mut a);
    let message = "discussion \"merge-01m8sexk4q\" is node \"clash\"'s merge conflict: an answer cannot resolve it; it is settled when the node merges";
    a.update(Update::Done(
        None,
        Err(octl_proto::AppError::invalid(message).with_hint(
            "resolve it in the node's worktree, commit, then run `orchestratectl merge 01JDXJ5R8A --node clash`",
        )),
    ));
    let screen = text(&draw(&a, 80, 24));
    let lines: Vec<&str> = screen.lines().collect();
    assert_eq!(lines.len(), 24);
    // The status rows, read as one text: every word is there, the last one included.
    let status = lines[lines.len() - 4..]
        .iter()
        .map(|l| l.trim())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(status.contains(message), "{screen}");
    assert!(status.contains("--node clash`)"), "{screen}");
    // The list keeps its header.
    assert!(lines[1].starts_with("NEEDS"), "{screen}");
}

#[test]
fn read_only_refuses_before_asking_and_the_line_goes_when_octld_is_back() {
    let mut a = app(true);
    four_runs(&mut a);
    a.update(Update::Link(Link::Reconnecting {
        since: std::time::Instant::now(),
        why: "x".into(),
    }));
    assert!(a.key(Some(Cmd::Cancel), Some('x')).is_empty());
    assert!(a.modal.is_none(), "nothing to confirm: {:?}", a.modal);
    let screen = text(&draw(&a, 80, 24));
    assert!(screen.contains("nothing can be changed now"), "{screen}");
    // Moving is not changing anything.
    a.key(Some(Cmd::Down), Some('j'));
    a.update(Update::Link(Link::Live));
    assert!(a.status.is_none(), "{:?}", a.status);
    let screen = text(&draw(&a, 80, 24));
    assert!(!screen.contains("nothing can be changed"), "{screen}");
    // A line about what happened stays.
    a.key(Some(Cmd::Merge), Some('m'));
    a.key(None, Some('n'));
    a.update(Update::Link(Link::Live));
    assert_eq!(a.status.as_ref().unwrap().text, "nothing done");
}

#[test]
fn at_80_columns_confirmations_show_their_keys_and_the_title_gets_the_free_width() {
    let mut a = app(true);
    let mut s = summary(A, "spinoff", "active", json!({"running": 1}));
    s.title = Some("fix the flaky login test today".into());
    let mut long = summary(B, "spinoff", "active", json!({"running": 1}));
    long.title = Some("a title far longer than what is left of the row at eighty columns".into());
    a.update(Update::Summaries(vec![s, long]));
    let screen = text(&draw(&a, 80, 24));
    assert!(
        screen.contains("fix the flaky login test today"),
        "the title has the width the columns leave:\n{screen}"
    );
    let cut = screen
        .lines()
        .find(|l| l.contains("a title far longer"))
        .unwrap();
    assert!(cut.trim_end().ends_with('…'), "{screen}");
    // Both confirmations of a cancel, keys in full.
    a.key(Some(Cmd::Cancel), Some('x'));
    let screen = text(&draw(&a, 80, 24));
    assert!(screen.contains("d: discard too… · n/esc: no"), "{screen}");
    a.key(None, Some('d'));
    let screen = text(&draw(&a, 80, 24));
    assert!(screen.contains("(snapshots are kept)?"), "{screen}");
    assert!(screen.contains("y: yes · n/esc: no"), "{screen}");
}

#[test]
fn inbox_text_wraps_under_its_indent() {
    let mut a = app(true);
    a.update(Update::Summaries(vec![summary(
        A,
        "generic",
        "active",
        json!({}),
    )]));
    let body = "the agent explains at length why it cannot decide alone which of the two colours the button should have, and asks";
    a.update(Update::Events(vec![
        ev(A, 1, None, "run.created", json!({"kind": "generic"})),
        ev(A, 2, Some("a"), "node.added", json!({})),
        ev(
            A,
            3,
            None,
            "discussion.opened",
            json!({"id": "q1", "node": "a", "title": "Which colour?", "body": body}),
        ),
    ]));
    a.key(Some(Cmd::Inbox), None);
    let screen = text(&draw(&a, 80, 24));
    let rows: Vec<&str> = screen
        .lines()
        .skip_while(|l| !l.contains("Which colour?"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    assert!(rows.len() >= 3, "the body wraps, then next:\n{screen}");
    for r in &rows {
        assert!(r.starts_with("          "), "not indented: {r:?}\n{screen}");
    }
    assert!(rows.join(" ").contains("and asks"), "{screen}");
}

#[test]
fn the_events_pane_keeps_the_node_column_in_its_width() {
    let events = [
        ev(A, 7, Some("main"), "node.started", json!({"pane": "%1"})),
        ev(
            A,
            12,
            None,
            "discussion.opened",
            json!({"id": "q1", "node": "main", "title": "x"}),
        ),
    ];
    let refs: Vec<&Event> = events.iter().collect();
    let lines = super::detail::event_lines(&refs);
    // The detail pane at 80 columns is 34 wide: seq, time, node and type fit in it.
    let started = &lines[0];
    let node_at = started.find(" main ").expect(started);
    let type_end = started.find("node.started").unwrap() + "node.started".len();
    assert!(node_at < 34 && type_end <= 34, "{lines:?}");
    assert!(
        lines[1].contains(" - ") && lines[1].contains("discussion.opened"),
        "{lines:?}"
    );
}

/// Run A (a spinoff) whose node `w` runs, and whose agent asked for `tool` with `input`
/// (request p1, seq 5).
fn asked_app(tool: &str, input: Value) -> App {
    let mut a = app(true);
    a.update(Update::Summaries(vec![summary(
        A,
        "spinoff",
        "active",
        json!({"running": 1}),
    )]));
    let by = |actor, mut e: Event| {
        e.actor = actor;
        e
    };
    a.update(Update::Events(vec![
        by(
            Actor::Daemon,
            ev(A, 1, None, "run.created", json!({"kind": "spinoff"})),
        ),
        by(Actor::Daemon, ev(A, 2, Some("w"), "node.added", json!({}))),
        by(
            Actor::Daemon,
            ev(
                A,
                3,
                Some("w"),
                "node.starting",
                json!({"branch": "octl/x/w", "worktree": "/w/x/w"}),
            ),
        ),
        by(
            Actor::Daemon,
            ev(A, 4, Some("w"), "node.started", json!({"pane": "%1"})),
        ),
        by(
            Actor::Agent,
            ev(
                A,
                5,
                Some("w"),
                "node.permission_asked",
                json!({"request": "p1", "tool": tool, "input": input, "detail": "Bash: x"}),
            ),
        ),
    ]));
    a
}

fn decide(behavior: PermissionBehavior, always: Option<&str>, reason: Option<&str>) -> Effect {
    Effect::Request(Request::Act(Action::Decide {
        run: A.into(),
        node: "w".into(),
        request: "p1".into(),
        behavior,
        always: always.map(str::to_string),
        reason: reason.map(str::to_string),
    }))
}

/// A command longer than a line at 80 columns: every word of it must be on screen.
const LONG: &str = "python3 scripts/migrate.py --database postgres://localhost/app --dry-run --verbose --tables users,orders,invoices,payments --then-exit";

#[test]
fn a_pending_permission_request_is_an_inbox_item_with_its_tool_and_whole_input() {
    let mut a = asked_app("Bash", json!({"command": LONG, "description": "migrate"}));
    // The runs list says why, whole, first.
    let screen = text(&draw(&a, 80, 24));
    assert!(
        screen.lines().nth(2).unwrap().starts_with("permission "),
        "{screen}"
    );
    assert_eq!(
        a.inbox,
        [InboxItem::Permission {
            run: A.into(),
            node: "w".into(),
            request: "p1".into(),
            tool: "Bash".into(),
            input: vec![format!("command: {LONG}"), "description: migrate".into()],
            rule: "Bash(python3 *)".into(),
        }]
    );
    a.key(Some(Cmd::Inbox), Some('i'));
    let screen = text(&draw(&a, 80, 24));
    let item = screen
        .lines()
        .position(|l| l.starts_with("permission "))
        .unwrap_or_else(|| panic!("no permission item:\n{screen}"));
    let line = screen.lines().nth(item).unwrap();
    assert!(line.contains("/w Bash (p1)"), "{screen}");
    // The whole input, wrapped under the item's indent, then what to do.
    let rows: Vec<&str> = screen
        .lines()
        .skip(item + 1)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    for r in &rows {
        assert!(
            r.starts_with("           "),
            "not indented: {r:?}\n{screen}"
        );
    }
    let said = rows.iter().map(|r| r.trim()).collect::<Vec<_>>().join(" ");
    assert!(said.contains(&format!("command: {LONG}")), "{screen}");
    assert!(said.contains("description: migrate"), "{screen}");
    assert!(
        said.contains(
            "next: y: allow · n: deny · A: allow always (Bash(python3 *) for the rest of the run)"
        ),
        "{screen}"
    );
    assert!(
        screen
            .lines()
            .last()
            .unwrap()
            .contains("y allow · n deny · A allow always"),
        "the footer has the keys:\n{screen}"
    );

    // y allows at once.
    assert_eq!(
        a.key(Some(Cmd::Accept), Some('y')),
        [decide(PermissionBehavior::Allow, None, None)]
    );
    // n asks why; the reason is optional.
    assert!(a.key(Some(Cmd::Reject), Some('n')).is_empty());
    let screen = text(&draw(&a, 80, 24));
    assert!(
        screen.contains("deny: why? (optional)") && screen.contains("enter: deny · esc: cancel"),
        "{screen}"
    );
    assert_eq!(
        a.key(Some(Cmd::Open), None),
        [decide(PermissionBehavior::Deny, None, None)]
    );
    a.key(Some(Cmd::Reject), Some('n'));
    for c in " use make ".chars() {
        a.key(None, Some(c));
    }
    assert_eq!(
        a.key(Some(Cmd::Open), None),
        [decide(PermissionBehavior::Deny, None, Some("use make"))]
    );
    // A asks first, naming the rule; its keys whole at 80 columns.
    assert!(a.key(Some(Cmd::AllowAlways), Some('A')).is_empty());
    let screen = text(&draw(&a, 80, 24));
    assert!(
        screen.contains("Bash(python3 *) for the rest of the run?"),
        "{screen}"
    );
    assert!(screen.contains("y: yes · n/esc: no"), "{screen}");
    assert_eq!(
        a.key(None, Some('y')),
        [decide(
            PermissionBehavior::Allow,
            Some("Bash(python3 *)"),
            None
        )]
    );
    a.key(Some(Cmd::AllowAlways), Some('A'));
    assert!(a.key(None, Some('n')).is_empty());
    assert_eq!(a.status.as_ref().unwrap().text, "nothing done");
    // Outside the inbox, where the input is not shown, nothing is allowed.
    a.key(Some(Cmd::Back), None);
    assert!(a.key(Some(Cmd::AllowAlways), Some('A')).is_empty());
    assert!(a.modal.is_none());
}

#[test]
fn a_decided_permission_request_leaves_the_inbox_and_a_refusal_is_said() {
    let mut a = asked_app("WebFetch", json!({"url": "https://example.com"}));
    a.key(Some(Cmd::Inbox), Some('i'));
    // Decided elsewhere (the CLI, or the daemon's timeout) while the reason is typed.
    a.key(Some(Cmd::Reject), Some('n'));
    let mut decided = ev(
        A,
        6,
        Some("w"),
        "node.permission_decided",
        json!({"request": "p1", "behavior": "allow", "by": "human", "always": false}),
    );
    decided.actor = Actor::Human;
    a.update(Update::Live(vec![decided]));
    assert!(a.inbox.is_empty(), "{:?}", a.inbox);
    assert_ne!(
        a.runs.get(A).unwrap().attention,
        Some(super::model::Attention::Permission)
    );
    let screen = text(&draw(&a, 80, 24));
    assert!(!screen.contains("permission "), "{screen}");
    // The denial sent anyway is refused by the daemon, and its words are shown.
    let action = match a.key(Some(Cmd::Open), None).pop() {
        Some(Effect::Request(Request::Act(action))) => action,
        other => panic!("{other:?}"),
    };
    let refusal = "permission request \"p1\" is already decided: allowed by human at 2026-11-30T10:00:06.000Z";
    a.update(Update::Done(
        Some(action),
        Err(octl_proto::AppError::new(
            octl_proto::ErrorKind::InvalidTransition,
            refusal,
        )),
    ));
    let screen = text(&draw(&a, 80, 24));
    let status = screen
        .lines()
        .rev()
        .take(4)
        .map(str::trim)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(status.contains(refusal), "{screen}");
    // With nothing selected, y and n are the proposal's keys again.
    a.key(Some(Cmd::Accept), Some('y'));
    assert_eq!(a.status.as_ref().unwrap().text, "no open proposal here");
}

#[test]
fn a_permission_requests_agent_text_is_shown_without_control_characters() {
    let mut a = asked_app(
        "Bash\u{1b}[2J",
        json!({"command": "echo hi\u{1b}[31m red\u{7}\r\nrm -rf /tmp/x\u{1b}]0;title\u{7}", "n": 3}),
    );
    let Some(InboxItem::Permission { tool, input, .. }) = a.inbox.first().cloned() else {
        panic!("{:?}", a.inbox);
    };
    assert_eq!(tool, "Bash");
    // Each line of a script is shown (none cut), and the other fields as JSON.
    assert_eq!(input, ["command: echo hi red", "rm -rf /tmp/x", "n: 3"]);
    a.key(Some(Cmd::Inbox), Some('i'));
    let screen = text(&draw(&a, 80, 24));
    assert!(
        !screen.chars().any(|c| c.is_control() && c != '\n'),
        "{screen:?}"
    );
    assert!(screen.contains("rm -rf /tmp/x"), "{screen}");
}

#[test]
fn read_only_refuses_a_permission_decision_before_asking() {
    let mut a = asked_app("Bash", json!({"command": "ls"}));
    a.key(Some(Cmd::Inbox), Some('i'));
    a.update(Update::Link(Link::Reconnecting {
        since: std::time::Instant::now(),
        why: "x".into(),
    }));
    for (cmd, ch) in [
        (Cmd::Accept, 'y'),
        (Cmd::Reject, 'n'),
        (Cmd::AllowAlways, 'A'),
    ] {
        assert!(a.key(Some(cmd), Some(ch)).is_empty(), "{cmd:?}");
        assert!(a.modal.is_none(), "{cmd:?}: {:?}", a.modal);
        assert_eq!(a.status.as_ref().unwrap().text, READ_ONLY);
    }
}

#[test]
fn help_fits_80_by_24() {
    let mut a = app(true);
    a.key(Some(Cmd::Help), Some('?'));
    let screen = text(&draw(&a, 80, 24));
    for (k, _, what) in super::keys::KEYS {
        assert!(
            screen.contains(&format!("{k:<8} {what}")),
            "{k} {what} not whole in help at 80×24:\n{screen}"
        );
    }
}

/// The diff has a line cursor; `c` on a line starts the review comment by naming it, and `d`
/// again shows what changed since the last review round.
#[test]
fn a_review_comment_names_the_diff_line_and_d_again_shows_the_diff_since_the_review() {
    use super::app::{Modal, Typing};
    use super::detail::{Load, Loaded};
    let mut a = dag_app();
    a.update(Update::Events(vec![
        ev(
            A,
            8,
            Some("schema"),
            "node.review",
            json!({"comments": ["first"], "by": "human", "way": "attempt", "head": "abc1234567890"}),
        ),
        ev(A, 9, Some("schema"), "node.done", json!({})),
    ]));
    let load = |effects: &[Effect]| {
        effects.iter().find_map(|e| match e {
            Effect::Request(Request::Load(l @ Load::Diff { .. })) => Some(l.clone()),
            _ => None,
        })
    };
    let first = load(&a.key(Some(Cmd::Diff), Some('d'))).expect("the diff is asked for");
    assert!(
        matches!(&first, Load::Diff { since: None, node, .. } if node == "schema"),
        "{first:?}"
    );
    let lines: Vec<String> = [
        "diff --git a/src/x.rs b/src/x.rs",
        "--- a/src/x.rs",
        "+++ b/src/x.rs",
        "@@ -40,2 +40,3 @@",
        " keep",
        "+added",
        " tail",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.update(Update::Loaded(first, Loaded::Lines(lines)));
    for _ in 0..5 {
        a.key(Some(Cmd::Down), Some('j'));
    }
    assert_eq!(a.diff_at, 5);
    let screen = text(&draw(&a, 100, 30));
    assert!(screen.contains("+added"), "{screen}");
    a.key(Some(Cmd::Review), Some('c'));
    match &a.modal {
        Some(Modal::Input {
            purpose: Typing::Review { node, .. },
            text,
        }) => {
            assert_eq!(node, "schema");
            assert_eq!(text, "src/x.rs:41: ");
        }
        other => panic!("{other:?}"),
    }
    a.key(Some(Cmd::Back), None);
    // Past the end stays on the last line.
    a.key(Some(Cmd::Bottom), Some('G'));
    a.key(Some(Cmd::Down), Some('j'));
    assert_eq!(a.diff_at, 6);
    let since = load(&a.key(Some(Cmd::Diff), Some('d'))).expect("the diff since is asked for");
    assert!(
        matches!(&since, Load::Diff { since: Some(t), .. } if t == "abc1234567890"),
        "{since:?}"
    );
    assert_eq!(a.diff_at, 0, "a new diff starts at its top");
    let screen = text(&draw(&a, 100, 30));
    assert!(
        screen.contains("since review 1 (at abc1234567)"),
        "{screen}"
    );
    let back = load(&a.key(Some(Cmd::Diff), Some('d'))).expect("and back");
    assert!(matches!(&back, Load::Diff { since: None, .. }), "{back:?}");
}
