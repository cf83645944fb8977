//! At home in the shell: the generated completion scripts run in a real bash (subcommands,
//! flags, and from the real daemon run ids, node names, profiles, discussions and proposals;
//! nothing when it is down), the man pages render, and
//! `install.sh --shell-files` puts both where shells and man look.

use std::path::Path;
use std::process::Command;

use octl_tests::{bin, TestEnv};
use serde_json::json;

/// Runs `orchestratectl completions bash` in a real bash and completes `words` (the last one
/// is the word under the cursor); returns the candidates.
fn bash_complete(env: &TestEnv, words: &[&str]) -> Vec<String> {
    let dir = bin("orchestratectl").parent().unwrap().to_path_buf();
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let script = format!(
        r#"source <(orchestratectl completions bash) || exit 9
COMP_WORDS=({words})
COMP_CWORD={cword}
COMP_LINE="${{COMP_WORDS[*]}}"
COMP_POINT=${{#COMP_LINE}}
_orchestratectl_with_runs orchestratectl "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\n' "${{COMPREPLY[@]}}""#,
        words = quoted.join(" "),
        cword = words.len() - 1,
    );
    let mut cmd = Command::new("bash");
    cmd.arg("-c").arg(script);
    env.isolate(&mut cmd);
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    cmd.env("PATH", path).env("OCTL_NO_AUTOSTART", "1");
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "bash: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn the_bash_script_completes_commands_flags_and_run_ids_from_the_daemon() {
    let env = TestEnv::new();
    // Commands and flags come from the clap definitions.
    assert_eq!(
        bash_complete(&env, &["orchestratectl", "orc"]),
        ["orchestrate"]
    );
    let run_subs = bash_complete(&env, &["orchestratectl", "run", "sh"]);
    assert_eq!(run_subs, ["show"]);
    let flags = bash_complete(&env, &["orchestratectl", "run", "logs", "--fo"]);
    assert_eq!(flags, ["--follow"]);
    // With the daemon down: no run ids, and the completion did not start it.
    assert!(bash_complete(&env, &["orchestratectl", "run", "show", ""]).is_empty());
    assert!(!env.socket().exists(), "a completion started the daemon");

    let _d = env.start_daemon();
    let a = env.create_run("first");
    let b = env.create_run("second");
    let mut runs = bash_complete(&env, &["orchestratectl", "run", "show", ""]);
    runs.sort();
    let mut want = vec![a.clone(), b.clone()];
    want.sort();
    assert_eq!(runs, want);
    // A prefix narrows them; `--run` and global options in between count too.
    assert_eq!(
        bash_complete(
            &env,
            &["orchestratectl", "--json", "merge", &a[..a.len() - 1]]
        ),
        std::slice::from_ref(&a)
    );
    let after_flag = bash_complete(&env, &["orchestratectl", "event", "list", "--run", ""]);
    assert_eq!(after_flag.len(), 2, "{after_flag:?}");
    // Not where a run goes.
    assert!(!bash_complete(&env, &["orchestratectl", "run", ""]).contains(&a));

    // A run's node names after --node, from the run the line names (positional or --run,
    // whichever comes first); option values in between are not taken for positionals.
    for node in ["build", "docs"] {
        env.rpc(
            "event.append",
            json!({"run": a, "node": node, "type": "node.added"}),
        );
    }
    let mut nodes = bash_complete(
        &env,
        &["orchestratectl", "run", "logs", &a[..10], "--node", ""],
    );
    nodes.sort();
    assert_eq!(nodes, ["build", "docs"]);
    assert_eq!(
        bash_complete(
            &env,
            &["orchestratectl", "node", "send", "--run", &a, "--node", "b"]
        ),
        ["build"]
    );
    assert!(
        bash_complete(&env, &["orchestratectl", "run", "logs", &b, "--node", ""]).is_empty(),
        "the other run has no nodes"
    );
    // Profiles after --agent, from the daemon's config.
    let profiles = bash_complete(&env, &["orchestratectl", "spawn", "spinoff", "--agent", ""]);
    for p in ["claude", "shell", "codex"] {
        assert!(profiles.iter().any(|x| x == p), "{p} in {profiles:?}");
    }
    // Open discussions and pending proposals where their commands take an id; an answered
    // one is not offered.
    let ask = |title: &str| {
        env.rpc(
            "discussion.ask",
            json!({"run": a, "node": "build", "title": title}),
        )["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (open, answered) = (ask("which one?"), ask("settled"));
    env.rpc("discussion.answer", json!({"id": answered, "text": "this"}));
    assert_eq!(
        bash_complete(&env, &["orchestratectl", "discussion", "answer", ""]),
        [open]
    );
    let proposal = env.rpc(
        "spinoff.propose",
        json!({"run": a, "node": "build", "task": "split this out"}),
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        bash_complete(&env, &["orchestratectl", "spinoff", "reject", ""]),
        [proposal]
    );
    // The calls the scripts installed before this one make still answer.
    let mut old = Command::new(bin("orchestratectl"));
    old.arg("__complete-runs");
    env.isolate(&mut old);
    let old = old.output().unwrap();
    assert_eq!(String::from_utf8_lossy(&old.stdout).lines().count(), 2);
}

#[test]
fn man_pages_render_for_every_command() {
    let env = TestEnv::new();
    let dir = env.root.path().join("man1");
    let out = env.cli(["man", "--dir", dir.to_str().unwrap()]);
    out.ok();
    for page in [
        "orchestratectl.1",
        "orchestratectl-run-show.1",
        "orchestratectl-spawn-spinoff.1",
        "orchestratectl-completions.1",
    ] {
        let roff = std::fs::read_to_string(dir.join(page)).unwrap();
        assert!(roff.contains(".TH "), "{page}: {roff}");
        assert!(roff.contains(".SH SYNOPSIS"), "{page}");
    }
    let show = std::fs::read_to_string(dir.join("orchestratectl-run-show.1")).unwrap();
    assert!(show.contains("orchestratectl run show"), "{show}");
    // Rendered by man itself where it is installed.
    if Path::new("/usr/bin/man").exists() {
        let out = Command::new("man")
            .arg("-l")
            .arg(dir.join("orchestratectl-run-show.1"))
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "100")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains("SYNOPSIS") && text.contains("<RUN>"),
            "{text}"
        );
    }
    // Without --dir: the top page on stdout.
    let top = env.cli(["man"]);
    assert!(
        top.stdout.contains(".SH SUBCOMMANDS") || top.stdout.contains("orchestratectl\\-run"),
        "{}",
        top.stdout
    );
}

#[test]
fn install_sh_puts_completions_and_pages_where_shells_and_man_look() {
    let env = TestEnv::new();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../install.sh");
    let data = env.root.path().join("data");
    let config = env.root.path().join("config");
    let mut cmd = Command::new("sh");
    cmd.arg(&script)
        .arg("--shell-files")
        .arg(bin("orchestratectl"));
    env.isolate(&mut cmd);
    let out = cmd
        .env("XDG_DATA_HOME", &data)
        .env("XDG_CONFIG_HOME", &config)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bash =
        std::fs::read_to_string(data.join("bash-completion/completions/orchestratectl")).unwrap();
    assert!(bash.contains("complete -F _orchestratectl_with_runs"));
    assert!(data.join("zsh/site-functions/_orchestratectl").is_file());
    assert!(config
        .join("fish/completions/orchestratectl.fish")
        .is_file());
    assert!(data.join("man/man1/orchestratectl-run-show.1").is_file());
    assert!(!env.socket().exists());
}
