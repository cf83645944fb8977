//! The web UI in a real browser (headless Chromium over WebDriver, `octl_tests::browser`)
//! against the real daemon, git and tmux, with shell agents. What a person does on the page —
//! answer a question, allow a permission request, accept a proposal, comment on a diff line
//! and send the review, merge, cancel with discard — is checked in the run's log, not only on
//! screen. The page follows an agent's reports live and a daemon killed and restarted, in
//! place. Agents' text carrying markup and `javascript:` links is shown as text in every view
//! and runs nothing. Screenshots of each view at a desktop's and a phone's size are written to
//! `target/ui-shots/` on every run.
//!
//! Build the binaries first: `cargo build --workspace --bins` (the page is embedded in octld).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use octl_tests::browser::{free_port, Browser, DESKTOP, PHONE};
use octl_tests::{wait_until, wait_until_describing, Daemon, TestEnv, TestRepo};
use serde_json::{json, Value};

/// The name screenshots of the first test start with.
const SHOTS: &str = "ui";

/// A world with the UI served and a browser logged in to it.
struct Ui {
    env: TestEnv,
    /// The page's address (`http://127.0.0.1:PORT/`).
    url: String,
    daemon: Option<Daemon>,
    repo: TestRepo,
    b: Browser,
}

impl Ui {
    /// A fresh home whose UI listens on `port` (0: any), its daemon, a repository, and a
    /// browser logged in through a one-time link.
    fn open(port: u16) -> Ui {
        let env = TestEnv::new();
        env.write_config(&format!("[ui]\nlisten = \"127.0.0.1:{port}\"\n"));
        let daemon = env.start_daemon();
        let repo = TestRepo::new(&env, "repo");
        let b = Browser::start(env.root.path());
        let mut ui = Ui {
            env,
            url: String::new(),
            daemon: Some(daemon),
            repo,
            b,
        };
        ui.login();
        ui
    }

    /// `orchestratectl ui --no-open`'s link, opened: the page lands on the runs.
    fn login(&mut self) {
        let out = self.env.cli(["--json", "ui", "--no-open"]);
        out.ok();
        let opened = out.json();
        self.url = opened["url"].as_str().unwrap().to_string();
        let link = opened["login_url"].as_str().unwrap().to_string();
        assert!(link.starts_with("http://127.0.0.1:"), "{opened}");
        self.b.goto(&link);
        self.fresh_page();
    }

    /// Once on `/`: waits for the page to have loaded, and counts any CSP violation from here
    /// on.
    fn fresh_page(&self) {
        self.b.wait_for("[data-test=runs]");
        self.b.wait_js(
            "the page to have landed on /",
            "return location.pathname === '/' && localStorage.getItem('octl.key')",
            vec![],
        );
        // Whatever the page is made to do from here on without a reload, a blocked inline
        // script or handler (markup injected despite everything) is counted.
        self.b.exec(
            "window.__csp = []; document.addEventListener('securitypolicyviolation', \
             (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI} ${e.sample}`));",
            vec![],
        );
    }

    /// A code run of one shell agent `node` doing `task`; its id.
    fn code_run(&self, node: &str, task: &str) -> String {
        self.env
            .spawn(
                "code",
                &self.repo,
                task,
                json!({"agent": "shell", "node": node}),
            )
            .unwrap_or_else(|e| panic!("spawn {task}: {e}"))["id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    fn worktree(&self, run: &str, node: &str) -> PathBuf {
        self.env.home.join("worktrees").join(run).join(node)
    }

    /// Waits until the run's log has an event of type `ty` that `pred` accepts; returns it.
    fn logged(&self, run: &str, ty: &str, pred: impl Fn(&Value) -> bool) -> Value {
        wait_until_describing(
            &format!("{ty} in the log of {run}"),
            Duration::from_secs(30),
            || {
                self.env
                    .log_events(run)
                    .into_iter()
                    .find(|e| e["type"] == json!(ty) && pred(e))
            },
            || format!("{:?}\n{}", self.env.event_types(run), self.b.describe()),
        )
    }

    /// Asserts that the page's status line shows no error now.
    fn no_error(&self) {
        let err = self.b.exec(
            "const s = document.querySelector('[data-test=status]'); \
             return s && !s.hidden && s.classList.contains('status-error') ? s.textContent : null",
            vec![],
        );
        assert_eq!(err, Value::Null, "the page shows an error");
    }

    /// Opens a route (`#/inbox`, `#/run/ID/NODE/TAB`) as a link in the page would.
    fn go(&self, hash: &str) {
        self.b.go_hash(hash);
        self.b.wait_js(
            &format!("the page at {hash}"),
            "return location.hash === arguments[0]",
            vec![json!(hash)],
        );
    }

    fn shot(&self, test: &str, view: &str) -> PathBuf {
        let p = self.b.screenshot(test, view);
        eprintln!("screenshot {}", p.display());
        p
    }
}

fn item(kind: &str, run: &str) -> String {
    format!("[data-test=inbox-item][data-kind={kind}][data-run=\"{run}\"]")
}

/// A named part of a test, run on the shared world.
type Scenario<'a> = (&'a str, &'a dyn Fn(&mut Ui));

/// Runs each scenario, a failure not hiding the ones after it; fails naming every one that
/// failed (each also says why above, and leaves a screenshot of the page).
fn scenarios(ui: &mut Ui, list: Vec<Scenario>) {
    let mut failed = Vec::new();
    for (name, f) in list {
        let t = Instant::now();
        let ok = catch_unwind(AssertUnwindSafe(|| f(ui))).is_ok();
        eprintln!(
            "scenario {name}: {} in {:.1} s",
            if ok { "ok" } else { "FAILED" },
            t.elapsed().as_secs_f64()
        );
        if !ok {
            let _ = catch_unwind(AssertUnwindSafe(|| ui.shot("failed", name)));
            failed.push(name);
            // What it left (an open dialog, say) must not fail the next one.
            ui.b.goto(&ui.url);
            ui.fresh_page();
        }
    }
    assert!(failed.is_empty(), "scenarios failed: {failed:?}");
}

// ---- the runs the first test acts on, started at once so their agents work meanwhile

struct Runs {
    question: String,
    permission: String,
    proposal: String,
    review: String,
    live: String,
    plan: String,
}

const PLAN: &str = "title = \"diamond: a, then b and c, then d\"\n\
    [[nodes]]\nid = \"a\"\ntask = \"printf a > a.txt\"\n\
    [[nodes]]\nid = \"b\"\ntask = \"test -e a.txt && printf b > b.txt\"\ndeps = [\"a\"]\n\
    [[nodes]]\nid = \"c\"\ntask = \"test -e a.txt && printf c > c.txt\"\ndeps = [\"a\"]\n\
    [[nodes]]\nid = \"d\"\ntask = \"test -e b.txt && test -e c.txt && printf d > d.txt\"\ndeps = [\"b\", \"c\"]\n";

fn start_runs(ui: &Ui) -> Runs {
    let question = ui.code_run(
        "asker",
        "orchestratectl discussion ask --title 'Which colour?' --body 'blue or green' --wait > answer.txt",
    );
    let input = json!({"hook_event_name": "PermissionRequest", "tool_name": "Bash",
                       "tool_input": {"command": "python3 x.py", "description": "run x"}});
    let permission = ui.code_run(
        "tool",
        &format!("echo '{input}' | orchestratectl hook PermissionAsk > \"$OCTL_WORKTREE.answer\""),
    );
    let proposal = ui.code_run(
        "noticer",
        "orchestratectl spinoff propose --task 'printf side > side.txt' --why 'separate work'",
    );
    // The first attempt writes notes.txt; the one a review sends back keeps the review.
    let review = ui.code_run(
        "w",
        "if [ -n \"$OCTL_REVIEW_FILE\" ]; then cp \"$OCTL_REVIEW_FILE\" review.md; else printf 'one\\ntwo\\nthree\\n' > notes.txt; fi",
    );
    let live = ui.code_run("live", "sleep 600");
    let plan = ui.env.rpc(
        "orchestrate.start",
        json!({"plan": PLAN, "format": "toml", "repo": ui.repo.path.display().to_string(),
               "agent": "shell", "max_parallel": 4}),
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    Runs {
        question,
        permission,
        proposal,
        review,
        live,
        plan,
    }
}

/// What the first test's screenshots wait for: every run settled where it waits for a person.
fn settle(ui: &Ui, r: &Runs) {
    let env = &ui.env;
    env.wait_permission_asked(&r.permission, "p1");
    wait_until("the question asked", Duration::from_secs(30), || {
        env.rpc("run.show", json!({"run": r.question}))["discussions"]
            .as_array()
            .is_some_and(|d| !d.is_empty())
            .then_some(())
    });
    env.wait_node(&r.proposal, "noticer", "done");
    env.wait_node(&r.review, "w", "done");
    env.wait_node(&r.live, "live", "running");
    let plan = env.wait_status(&r.plan, &["waiting", "failed", "completed"]);
    assert_eq!(plan["manifest"]["nodes"], json!({"merged": 4}), "{plan}");
}

/// What sticks out of the viewport's width where the person cannot scroll to it (the page
/// wider than the screen, or cut off by a box that does not scroll): empty when nothing.
fn cut_off(b: &Browser) -> Value {
    b.exec(
        r#"const W = window.innerWidth; const out = [];
        const sw = document.scrollingElement.scrollWidth;
        if (sw > W) out.push(`the page is ${sw} px wide`);
        for (const el of document.querySelectorAll('body *')) {
          // An SVG's shapes are drawn in its own box: the <svg> is what is placed.
          if (el instanceof SVGElement && el.tagName.toLowerCase() !== 'svg') continue;
          const r = el.getBoundingClientRect();
          if (!r.width || r.right <= W + 1) continue;
          let p = el.parentElement;
          while (p && getComputedStyle(p).overflowX === 'visible') p = p.parentElement;
          const o = p ? getComputedStyle(p).overflowX : 'visible';
          // Inside a box that scrolls and itself fits: reachable.
          if ((o === 'auto' || o === 'scroll') && p.getBoundingClientRect().right <= W + 1) continue;
          const c = typeof el.className === 'string' ? el.className : el.className.baseVal;
          out.push(`${el.tagName.toLowerCase()}${c ? '.' + c.trim().split(/\s+/).join('.') : ''} ends at ${Math.round(r.right)} px (in ${p ? p.tagName.toLowerCase() : 'nothing'} overflow-x ${o})`);
        }
        return out.slice(0, 12);"#,
        vec![],
    )
}

/// At a phone's width nothing is out of reach sideways.
fn fits(ui: &Ui, view: &str) {
    if ui.b.size().0 == PHONE.0 {
        assert_eq!(cut_off(&ui.b), json!([]), "{view} at {:?}", ui.b.size());
    }
}

fn screenshots(ui: &mut Ui, r: &Runs, (w, h): (u32, u32)) {
    ui.b.set_size(w, h);
    let b = &ui.b;
    ui.go("#/runs");
    b.wait("every run's row", Duration::from_secs(20), || {
        (b.all("[data-test=run-row]").len() >= 6).then_some(())
    });
    ui.shot(SHOTS, "runs");
    fits(ui, "runs");
    ui.go("#/inbox");
    for (kind, run) in [
        ("permission", &r.permission),
        ("question", &r.question),
        ("proposal", &r.proposal),
        ("merge", &r.review),
    ] {
        b.wait_for(&item(kind, run));
    }
    ui.shot(SHOTS, "inbox");
    fits(ui, "inbox");
    ui.go(&format!("#/run/{}", r.plan));
    b.wait(
        "the plan's graph with its four nodes",
        Duration::from_secs(20),
        || (b.all("[data-test=graph] [data-node]").len() == 4).then_some(()),
    );
    b.wait_for("[data-test=timeline]");
    ui.shot(SHOTS, "graph");
    fits(ui, "the run with a graph");
    ui.go(&format!("#/run/{}/w/diff", r.review));
    b.wait_for("[data-test=diff-line][data-anchor=\"notes.txt:2\"]");
    b.exec(
        "document.querySelector('[data-test=review-box]').scrollIntoView({block: 'start'})",
        vec![],
    );
    ui.shot(SHOTS, "diff");
    fits(ui, "the diff");
    ui.no_error();
}

// ---- the actions

fn answer_a_question(ui: &mut Ui, run: &str) {
    let b = &ui.b;
    // By the page's own navigation.
    ui.go("#/runs");
    b.click("[data-test=nav-inbox]");
    b.wait_js(
        "the inbox's address",
        "return location.hash === '#/inbox'",
        vec![],
    );
    let it = item("question", run);
    b.wait_text(&it, "Which colour?");
    b.wait_text(&it, "blue or green");
    b.type_into(&format!("{it} [data-test=answer-input]"), "green, please");
    b.click(&format!("{it} [data-test=answer-send]"));
    let ev = ui.logged(run, "discussion.resolved", |_| true);
    assert_eq!(ev["data"]["answer"], json!("green, please"), "{ev}");
    assert_eq!(ev["actor"], json!("human"), "{ev}");
    // The agent waiting on it got the answer, and the item left the inbox.
    let answer = ui.worktree(run, "asker").join("answer.txt");
    wait_until(
        "the agent to get the answer",
        Duration::from_secs(30),
        || {
            std::fs::read_to_string(&answer)
                .ok()
                .filter(|t| t.contains("green, please"))
        },
    );
    b.wait_gone(&it);
    ui.no_error();
}

fn allow_a_permission_request(ui: &mut Ui, run: &str) {
    let b = &ui.b;
    ui.go("#/inbox");
    let it = item("permission", run);
    b.wait_text(&it, "python3 x.py");
    b.click(&format!("{it} [data-test=allow]"));
    let ev = ui.logged(run, "node.permission_decided", |_| true);
    assert_eq!(ev["data"]["request"], json!("p1"), "{ev}");
    assert_eq!(ev["data"]["behavior"], json!("allow"), "{ev}");
    assert_ne!(ev["data"]["always"], json!(true), "{ev}");
    assert_eq!(ev["actor"], json!("human"), "{ev}");
    // The hook that asked was answered with it.
    let file = format!("{}.answer", ui.worktree(run, "tool").display());
    let answer = wait_until("the hook's answer", Duration::from_secs(30), || {
        std::fs::read_to_string(&file)
            .ok()
            .filter(|t| t.ends_with('\n'))
    });
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(
        answer["hookSpecificOutput"]["decision"]["behavior"],
        json!("allow"),
        "{answer}"
    );
    b.wait_gone(&it);
    ui.no_error();
}

fn accept_a_proposal(ui: &mut Ui, run: &str) {
    let b = &ui.b;
    ui.go("#/inbox");
    let it = item("proposal", run);
    b.wait_text(&it, "printf side > side.txt");
    b.wait_text(&it, "separate work");
    b.click(&format!("{it} [data-test=accept]"));
    let ev = ui.logged(run, "spinoff.accepted", |_| true);
    let child = ev["data"]["run"]
        .as_str()
        .expect("the new run's id")
        .to_string();
    assert_eq!(ev["data"]["agent"], json!("shell"), "{ev}");
    // The proposal's run (made just after the decision is recorded) does its work and
    // merges it; the page lists it.
    wait_until("the proposal's run", Duration::from_secs(30), || {
        ui.env.try_rpc("run.show", json!({"run": child})).ok()
    });
    ui.env.wait_status(&child, &["completed"]);
    assert_eq!(ui.repo.show("main", "side.txt").as_deref(), Some("side"));
    b.wait_gone(&it);
    ui.go("#/runs");
    b.wait_for(&format!("[data-test=run-row][data-run=\"{child}\"]"));
    ui.no_error();
}

fn review_a_diff_line_then_merge(ui: &mut Ui, run: &str) {
    let b = &ui.b;
    // Its row, then its node's Diff tab: the address follows.
    ui.go("#/runs");
    b.click(&format!("[data-test=run-row][data-run=\"{run}\"]"));
    b.click("[data-test=node-row][data-node=w]");
    b.click("[data-test=tab-diff]");
    b.wait_js(
        "the diff's address",
        "return location.hash === `#/run/${arguments[0]}/w/diff`",
        vec![json!(run)],
    );
    let line = "[data-test=diff-line][data-anchor=\"notes.txt:2\"]";
    b.wait_text(line, "two");
    b.click(line);
    b.type_into("[data-test=comment-input]", "say 2, not two");
    b.wait_text("[data-test=review-box]", "1 comment");
    ui.shot(SHOTS, "diff-comment");
    // Side by side and back: the comment being written stays under its line.
    for mode in ["split", "unified"] {
        b.click("[data-test=diff-mode]");
        b.wait_js(
            &format!("the diff {mode}, the comment kept"),
            "const c = document.querySelector('[data-test=comment-input]'); \
             return c && c.value === 'say 2, not two' && !!document.querySelector('[data-test=diff] .split') === (arguments[0] === 'split')",
            vec![json!(mode)],
        );
        if mode == "split" {
            ui.shot(SHOTS, "diff-split");
        }
    }
    b.click("[data-test=review-send]");
    let ev = ui.logged(run, "node.review", |_| true);
    assert_eq!(
        ev["data"]["comments"],
        json!(["notes.txt:2: say 2, not two"]),
        "the comment is anchored to its line: {ev}"
    );
    assert_ne!(ev["data"]["approve"], json!(true), "{ev}");
    assert_eq!(ev["actor"], json!("human"), "{ev}");
    // Sent back to the shell agent: a new attempt keeps the review, and is done again.
    wait_until(
        "the review in the worktree",
        Duration::from_secs(30),
        || {
            std::fs::read_to_string(ui.worktree(run, "w").join("review.md"))
                .ok()
                .filter(|t| t.contains("notes.txt:2: say 2, not two"))
        },
    );
    ui.env.wait_node(run, "w", "done");
    ui.no_error();

    // Merge from the run's page, once it shows the node done again.
    ui.go(&format!("#/run/{run}"));
    b.wait_js(
        "the node shown done again, after its review",
        "const r = document.querySelector('[data-test=node-row][data-node=w]'); \
         return r && r.textContent.includes('done') && document.body.innerText.includes('reviews')",
        vec![],
    );
    b.click("[data-test=run-view] [data-test=merge]");
    b.wait_text("[data-test=confirm]", "Merge");
    b.click("[data-test=confirm-yes]");
    let ev = ui.logged(run, "merge.succeeded", |_| true);
    assert_eq!(ev["node"], json!("w"), "{ev}");
    assert_eq!(
        ui.repo.show("main", "notes.txt").as_deref(),
        Some("one\ntwo\nthree\n")
    );
    assert!(ui
        .repo
        .show("main", "review.md")
        .is_some_and(|t| t.contains("say 2, not two")));
    b.wait_text("[data-test=run-view]", "completed");
    ui.no_error();
}

fn cancel_with_discard(ui: &mut Ui, run: &str) {
    let b = &ui.b;
    // Opened from its row in the list.
    ui.go("#/runs");
    b.click(&format!("[data-test=run-row][data-run=\"{run}\"]"));
    b.wait_js(
        "the run's address",
        "return location.hash === `#/run/${arguments[0]}`",
        vec![json!(run)],
    );
    b.wait_text("[data-test=node-row][data-node=live]", "running");
    let cancel = "[data-test=run-view] [data-test=cancel]";
    // Saying no at the second question does nothing: the button is back, nothing recorded.
    b.click(cancel);
    b.wait_text("[data-test=confirm]", "Cancel the run?");
    b.click("[data-test=confirm] [data-test=discard]");
    b.click("[data-test=confirm-yes]");
    b.wait_text("[data-test=confirm]", "Discard the work?");
    ui.shot(SHOTS, "confirm-discard");
    b.click("[data-test=confirm-no]");
    b.wait_gone("[data-test=confirm]");
    b.wait_js(
        "the cancel button back",
        "const c = document.querySelector('[data-test=run-view] [data-test=cancel]'); return c && !c.disabled",
        vec![],
    );
    assert!(
        !ui.env
            .event_types(run)
            .contains(&"run.cancelled".to_string()),
        "nothing cancelled after Back"
    );
    // Confirmed twice: cancelled, the work discarded.
    b.click(cancel);
    b.wait_text("[data-test=confirm]", "Cancel the run?");
    b.click("[data-test=confirm] [data-test=discard]");
    b.click("[data-test=confirm-yes]");
    b.wait_text("[data-test=confirm]", "Discard the work?");
    b.click("[data-test=confirm-yes]");
    let ev = ui.logged(run, "run.cancelled", |_| true);
    // (Recorded by the daemon, whoever asked, as from the CLI.)
    assert_eq!(ev["data"]["discard"], json!(true), "{ev}");
    let wt = ui.worktree(run, "live");
    wait_until("the worktree removed", Duration::from_secs(30), || {
        (!wt.exists()).then_some(())
    });
    b.wait_text("[data-test=run-view]", "cancelled");
    ui.no_error();
}

// ---- hostile text

const SCRIPT: &str = "<script>window.__pwned=1</script>";
const IMG: &str = "<img src=x onerror=\"window.__pwned=1\">";
const LINK: &str = "<a href=\"javascript:window.__pwned=1\">j</a>";
const JS: &str = "javascript:window.__pwned=1";

/// What in the page could have run the agents' text: empty when nothing.
fn unsafe_things(b: &Browser) -> Value {
    b.exec(
        r#"const bad = [];
        if (window.__pwned !== undefined) bad.push(`window.__pwned = ${window.__pwned}`);
        for (const v of window.__csp || []) bad.push(`CSP violation: ${v}`);
        for (const el of document.querySelectorAll('*')) {
          for (const a of el.attributes) {
            if (/^on/i.test(a.name)) bad.push(`${el.tagName} has ${a.name}`);
            if (/^\s*javascript:/i.test(a.value)) bad.push(`${el.tagName} ${a.name}=${a.value}`);
          }
        }
        for (const s of document.querySelectorAll('script')) {
          if (!/^\/assets\/[a-z]+\.js$/.test(s.getAttribute('src') || '')) bad.push(`script ${s.outerHTML.slice(0, 120)}`);
        }
        for (const el of document.querySelectorAll('img, iframe, object, embed, frame')) bad.push(el.outerHTML.slice(0, 120));
        for (const a of document.querySelectorAll('a')) {
          const h = a.getAttribute('href') || a.getAttribute('xlink:href') || '';
          if (/^\s*javascript:/i.test(h)) bad.push(`a href ${h}`);
        }
        return bad;"#,
        vec![],
    )
}

fn assert_safe(ui: &Ui, view: &str) {
    let b = &ui.b;
    assert_eq!(
        b.exec("return window.__pwned === undefined", vec![]),
        json!(true),
        "{view}: the agent's text ran"
    );
    assert_eq!(
        unsafe_things(b),
        json!([]),
        "{view}: markup from the agent's text became elements"
    );
}

fn hostile_text_is_only_text(ui: &mut Ui) {
    let script = ui.env.root.path().join("xss.sh");
    std::fs::write(
        &script,
        format!(
            "S='{SCRIPT}'\nI='{IMG}'\nA='{LINK}'\n\
             printf 'screen says %s %s %s {JS}\\n' \"$S\" \"$I\" \"$A\"\n\
             printf '%s\\n%s\\n%s\\n{JS}\\n' \"$S\" \"$I\" \"$A\" > evil.html\n\
             orchestratectl discussion ask --title \"ask $S $I\" --body \"body $A {JS}\"\n\
             orchestratectl node progress --message \"progress $S $I $A\"\n\
             orchestratectl spinoff propose --task \"task $S $I\" --why \"why $A\"\n\
             echo xss-ready\nexec sleep 600\n"
        ),
    )
    .unwrap();
    // The run's title is the task's first line: markup in a shell comment.
    let task = format!("# {SCRIPT}{IMG}\nsh {}", script.display());
    let run = ui.code_run("xss", &task);
    let titled = ui.env.rpc(
        "run.create",
        json!({"kind": "generic", "title": format!("{SCRIPT} {IMG} {LINK} {JS}")}),
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    ui.logged(&run, "spinoff.proposed", |_| true);
    ui.logged(&run, "node.progress", |_| true);
    ui.b.set_size(DESKTOP.0, DESKTOP.1);
    let b = &ui.b;

    ui.go("#/runs");
    b.wait_for(&format!("[data-test=run-row][data-run=\"{run}\"]"));
    b.wait_for(&format!("[data-test=run-row][data-run=\"{titled}\"]"));
    let text = b.page_text();
    assert!(
        text.contains(&format!("# {SCRIPT}{IMG}")),
        "the title is shown as text:\n{text}"
    );
    assert!(
        text.contains(&format!("{SCRIPT} {IMG} {LINK} {JS}")),
        "{text}"
    );
    assert_safe(ui, "runs");

    ui.go("#/inbox");
    let q = item("question", &run);
    b.wait_text(&q, &format!("ask {SCRIPT} {IMG}"));
    b.wait_text(&q, &format!("body {LINK} {JS}"));
    let p = item("proposal", &run);
    b.wait_text(&p, &format!("task {SCRIPT} {IMG}"));
    b.wait_text(&p, &format!("why {LINK}"));
    assert_safe(ui, "inbox");

    let screen = format!("screen says {SCRIPT} {IMG} {LINK} {JS}");
    for (tab, css, want) in [
        ("screen", "[data-test=screen]", screen.as_str()),
        ("log", "[data-test=log]", &format!("screen says {SCRIPT}")),
        ("diff", "[data-test=diff]", SCRIPT),
        (
            "events",
            "[data-test=events]",
            "progress <script>window.__pwned=1</script>",
        ),
    ] {
        ui.go(&format!("#/run/{run}/xss/{tab}"));
        b.wait_text(css, want);
        b.wait_text("[data-test=run-view]", &format!("# {SCRIPT}{IMG}"));
        if tab == "diff" {
            for line in [SCRIPT, IMG, LINK, JS] {
                b.wait_text("[data-test=diff-line]", line);
            }
        }
        assert_safe(ui, &format!("run view, {tab}"));
    }
    ui.shot("xss", "run");
    ui.go(&format!("#/run/{titled}"));
    b.wait_text(
        "[data-test=run-view]",
        &format!("{SCRIPT} {IMG} {LINK} {JS}"),
    );
    assert_safe(ui, "the titled run's view");
    ui.no_error();
    // The checks can fail: the same markup put in as markup is caught (the CSP blocks its
    // handler, which is counted, and the elements are there), then taken out again.
    b.exec(
        "const d = document.createElement('div'); d.id = 'injected'; d.innerHTML = arguments[0]; document.body.append(d)",
        vec![json!(format!("{IMG}{LINK}"))],
    );
    let caught = b.wait_js(
        "the injected image's handler blocked",
        "return window.__csp.length ? window.__csp : null",
        vec![],
    );
    let found = unsafe_things(b).to_string();
    for what in ["CSP violation", "IMG has onerror", "a href javascript:"] {
        assert!(
            found.contains(what),
            "{what} not caught: {found} ({caught})"
        );
    }
    b.exec(
        "document.getElementById('injected').remove(); window.__csp = []",
        vec![],
    );
    assert_safe(ui, "after the self-check");
    ui.env.rpc("run.cancel", json!({"run": run}));
}

/// One daemon and one browser for everything that does not stop the daemon: screenshots of
/// each view at both sizes, each action through the page checked in the log (the cancel on
/// a phone's screen), then agents' hostile text in every view.
#[test]
#[ignore = "needs chromium and chromedriver (CI installs them)"]
fn a_person_acts_through_the_browser_and_the_log_records_it() {
    let t0 = Instant::now();
    let mut ui = Ui::open(0);
    let runs = start_runs(&ui);
    settle(&ui, &runs);
    eprintln!("started and settled in {:.1} s", t0.elapsed().as_secs_f64());
    let r = &runs;
    scenarios(
        &mut ui,
        vec![
            ("screenshots-desktop", &|ui| screenshots(ui, r, DESKTOP)),
            ("screenshots-phone", &|ui| screenshots(ui, r, PHONE)),
            // Still at a phone's size: its buttons and dialogs work there too.
            ("cancel-with-discard", &|ui| {
                cancel_with_discard(ui, &r.live)
            }),
            ("answer-a-question", &|ui| {
                ui.b.set_size(DESKTOP.0, DESKTOP.1);
                answer_a_question(ui, &r.question)
            }),
            ("allow-a-permission-request", &|ui| {
                allow_a_permission_request(ui, &r.permission)
            }),
            ("accept-a-proposal", &|ui| {
                accept_a_proposal(ui, &r.proposal)
            }),
            ("review-a-diff-line-then-merge", &|ui| {
                review_a_diff_line_then_merge(ui, &r.review)
            }),
            ("hostile-text-is-only-text", &hostile_text_is_only_text),
        ],
    );
    eprintln!("whole test in {:.1} s", t0.elapsed().as_secs_f64());
}

/// The page open on a run's node follows an agent's reports without a reload; the daemon
/// killed (-9) and started again on the same port, the banner says it reconnects, and the
/// page shows what the agent reports after the restart, still on the same run, node and tab.
#[test]
#[ignore = "needs chromium and chromedriver (CI installs them)"]
fn the_page_follows_an_agent_live_across_a_daemon_restart() {
    let t0 = Instant::now();
    let mut ui = Ui::open(free_port());
    let go = ui.env.root.path().join("go");
    // Each `go.N` file the test makes, the agent reports once.
    let task = format!(
        "i=1; while :; do while [ ! -e {go}.$i ]; do sleep 0.05; done; orchestratectl node progress --message \"report $i\"; i=$((i+1)); done",
        go = go.display()
    );
    let run = ui.code_run("w", &task);
    ui.env.wait_node(&run, "w", "running");
    let hash = format!("#/run/{run}/w/events");
    ui.go(&hash);
    let b = &ui.b;
    b.wait_for("[data-test=events]");
    // Set on this page: a reload would lose it.
    b.exec("window.__samePage = 'yes'", vec![]);

    // The agent reports; the page shows it.
    let report = |ui: &Ui, n: u32| {
        std::fs::write(format!("{}.{n}", go.display()), "").unwrap();
        ui.logged(&run, "node.progress", |e| {
            e["data"]["message"] == json!(format!("report {n}"))
        });
        ui.b.wait_text("[data-test=events]", &format!("report {n}"));
    };
    report(&ui, 1);

    ui.daemon.take().unwrap().kill9();
    let b = &ui.b;
    b.wait_text("[data-test=conn-banner]", "reconnecting");
    ui.shot("live", "daemon-down");
    ui.daemon = Some(ui.env.start_daemon());
    let b = &ui.b;
    // Back: the banner says so (or has already gone), and the page reads again.
    b.wait(
        "the banner to say the daemon is back",
        Duration::from_secs(20),
        || {
            let v = b
                .try_exec(
                    "const e = document.querySelector('[data-test=conn-banner]'); return [e.hidden, e.textContent]",
                    vec![],
                )
                .ok()?;
            (v[0] == json!(true) || v[1].as_str()?.contains("reconnected")).then_some(())
        },
    );
    report(&ui, 2);
    let b = &ui.b;
    assert_eq!(
        b.exec("return window.__samePage", vec![]),
        json!("yes"),
        "the page was not reloaded"
    );
    assert_eq!(b.hash(), hash, "still on the same run, node and tab");
    assert_eq!(
        b.exec(
            "return [document.querySelector('[data-test=node-row][aria-current=true]')?.dataset.node, \
             document.querySelector('[data-test=tab-events]').getAttribute('aria-selected'), \
             document.querySelector('[data-test=run-view]').dataset.run]",
            vec![],
        ),
        json!(["w", "true", run]),
        "the selected node and tab"
    );
    ui.shot("live", "after-restart");
    ui.no_error();
    ui.env.rpc("run.cancel", json!({"run": run}));
    eprintln!("whole test in {:.1} s", t0.elapsed().as_secs_f64());
}
