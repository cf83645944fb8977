//! Property tests of `config.toml` (`Config::parse`) and of how a profile
//! turns a task into an argv: random and almost-valid documents never panic, what is accepted
//! obeys the rules, and a task only ever becomes argv elements, never shell text.
//!
//! 10,000 cases in all (`octl-proto/tests/fuzz.rs` counts them into the 100,000 of one run).

use proptest::prelude::*;
use proptest::test_runner::Config as PropConfig;
use serde_json::{json, Map, Value};

use crate::agents::{self, Mode};
use crate::config::{Config, OnExit};
use octl_proto::ids::is_node_id;
use octl_proto::ErrorKind;

fn cases(n: u32) -> PropConfig {
    PropConfig {
        cases: n,
        failure_persistence: None,
        ..PropConfig::default()
    }
}

/// What every accepted configuration satisfies.
fn check_accepted(c: &Config) -> Result<(), TestCaseError> {
    for (name, agent) in &c.agents {
        prop_assert!(is_node_id(name), "profile name {:?} accepted", name);
        for argv in [&agent.interactive, &agent.autonomous]
            .into_iter()
            .flatten()
        {
            prop_assert!(!argv.is_empty() && !argv[0].is_empty(), "{:?}", argv);
        }
    }
    Ok(())
}

fn check(text: &str) -> Result<Option<Config>, TestCaseError> {
    match Config::parse(text) {
        Ok(c) => {
            check_accepted(&c)?;
            Ok(Some(c))
        }
        Err(e) => {
            prop_assert_eq!(e.kind, ErrorKind::InvalidParams);
            prop_assert!(!e.message.trim().is_empty());
            Ok(None)
        }
    }
}

fn soup() -> impl Strategy<Value = String> {
    let tokens = vec![
        "[defaults]\n",
        "[agents.aider]\n",
        "[agents.\"Bad Name\"]\n",
        "[agents.claude]\n",
        "[agents]\n",
        "[[agents]]\n",
        "agent = ",
        "interactive = ",
        "autonomous = ",
        "on_exit = ",
        "program = ",
        "permission_mode = ",
        "allowed_tools = ",
        "\"done\"",
        "\"exited\"",
        "\"{prompt}\"",
        "\"aider\"",
        "\"\"",
        "[",
        "]",
        "{",
        "}",
        ",",
        "=",
        "\n",
        " ",
        "1",
        "true",
        "1979-05-27",
        "# c\n",
        "agents.x.autonomous = [\"x\"]\n",
        "\"\\u0000\"",
        "'$(touch /tmp/x)'",
        "\"é\"",
    ];
    prop_oneof![
        proptest::collection::vec(proptest::sample::select(tokens), 0..50).prop_map(|t| t.concat()),
        proptest::collection::vec(any::<char>(), 0..200).prop_map(|c| c.into_iter().collect()),
    ]
}

proptest! {
    #![proptest_config(cases(4_000))]
    #[test]
    fn config_any_text(text in soup()) {
        check(&text)?;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Mistake {
    BadName,
    EmptyArgv,
    EmptyProgram,
    UnknownKey,
    BadOnExit,
    ArgvNotStrings,
    DefaultsNotTable,
}

fn argv() -> impl Strategy<Value = Vec<String>> {
    (
        proptest::string::string_regex("[a-z/][a-z0-9/._-]{0,15}").unwrap(),
        proptest::collection::vec(
            prop_oneof![
                Just("{prompt}".to_string()),
                proptest::string::string_regex("[ -~]{0,12}").unwrap()
            ],
            0..4,
        ),
    )
        .prop_map(|(p, rest)| std::iter::once(p).chain(rest).collect())
}

#[derive(Debug, Clone)]
struct Profile {
    interactive: Option<Vec<String>>,
    autonomous: Option<Vec<String>>,
    on_exit: Option<bool>,
}

fn profile() -> impl Strategy<Value = Profile> {
    (
        proptest::option::of(argv()),
        proptest::option::of(argv()),
        proptest::option::of(any::<bool>()),
    )
        .prop_map(|(interactive, autonomous, on_exit)| Profile {
            interactive,
            autonomous,
            on_exit,
        })
}

proptest! {
    #![proptest_config(cases(3_000))]
    /// A valid configuration is read back exactly; each mistake put into it is refused, with
    /// a message that points at it.
    #[test]
    fn config_almost_valid(
        profiles in proptest::collection::btree_map(
            proptest::string::string_regex("[a-z0-9][a-z0-9-]{0,10}").unwrap(),
            profile(),
            0..5,
        ),
        default in proptest::option::of(proptest::string::string_regex("[a-z]{1,8}").unwrap()),
        mistake in proptest::option::of(proptest::sample::select(vec![
            Mistake::BadName,
            Mistake::EmptyArgv,
            Mistake::EmptyProgram,
            Mistake::UnknownKey,
            Mistake::BadOnExit,
            Mistake::ArgvNotStrings,
            Mistake::DefaultsNotTable,
        ])),
    ) {
        let mut agents = Map::new();
        for (name, p) in &profiles {
            let mut t = Map::new();
            if let Some(a) = &p.interactive {
                t.insert("interactive".into(), json!(a));
            }
            if let Some(a) = &p.autonomous {
                t.insert("autonomous".into(), json!(a));
            }
            if let Some(done) = p.on_exit {
                t.insert("on_exit".into(), json!(if done { "done" } else { "exited" }));
            }
            agents.insert(name.clone(), Value::Object(t));
        }
        let mut doc = Map::new();
        if let Some(d) = &default {
            doc.insert("defaults".into(), json!({ "agent": d }));
        }
        let expect: Option<&str> = match mistake {
            None => None,
            Some(Mistake::BadName) => {
                agents.insert("Bad Name".into(), json!({}));
                Some("agent profile name")
            }
            Some(Mistake::EmptyArgv) => {
                agents.insert("zz-empty".into(), json!({ "autonomous": [] }));
                Some("agents.zz-empty.autonomous")
            }
            Some(Mistake::EmptyProgram) => {
                agents.insert("zz-empty".into(), json!({ "interactive": ["", "{prompt}"] }));
                Some("agents.zz-empty.interactive")
            }
            Some(Mistake::UnknownKey) => {
                agents.insert("zz-unknown".into(), json!({ "autonomus": ["x"] }));
                Some("autonomus")
            }
            Some(Mistake::BadOnExit) => {
                agents.insert("zz-exit".into(), json!({ "on_exit": "maybe" }));
                Some("maybe")
            }
            Some(Mistake::ArgvNotStrings) => {
                agents.insert("zz-types".into(), json!({ "autonomous": ["x", 1] }));
                Some("")
            }
            Some(Mistake::DefaultsNotTable) => {
                doc.insert("defaults".into(), json!("claude"));
                Some("")
            }
        };
        doc.insert("agents".into(), Value::Object(agents));
        let text = toml::to_string(&Value::Object(doc)).unwrap();
        let got = check(&text)?;
        match (expect, got) {
            (None, Some(c)) => {
                prop_assert_eq!(&c.defaults.agent, &default);
                let names: Vec<&String> = c.agents.keys().collect();
                let want: Vec<&String> = profiles.keys().collect();
                prop_assert_eq!(names, want);
                for (name, p) in &profiles {
                    let a = &c.agents[name];
                    prop_assert_eq!(&a.interactive, &p.interactive);
                    prop_assert_eq!(&a.autonomous, &p.autonomous);
                    prop_assert_eq!(
                        a.on_exit,
                        p.on_exit.map(|d| if d { OnExit::Done } else { OnExit::Exited })
                    );
                }
            }
            (None, None) => {
                return Err(TestCaseError::fail(format!(
                    "a valid config refused: {:?}\n{text}",
                    Config::parse(&text).unwrap_err().message
                )));
            }
            (Some(words), got) => {
                prop_assert!(got.is_none(), "{:?} accepted:\n{}", mistake, text);
                let msg = Config::parse(&text).unwrap_err().message;
                prop_assert!(msg.contains(words), "{:?}: {:?}", mistake, msg);
            }
        }
    }
}

proptest! {
    #![proptest_config(cases(3_000))]
    /// However hostile the task, a profile makes it argv elements only: a user template gets
    /// `{prompt}` replaced inside its own elements and nothing else changes; claude takes it
    /// as one element after `--`; shell runs it as the script it is (by design).
    #[test]
    fn tasks_only_ever_become_argv_elements(
        template in argv(),
        task in prop_oneof![
            proptest::collection::vec(any::<char>(), 0..80).prop_map(|c| c.into_iter().collect::<String>()),
            proptest::sample::select(vec![
                "$(touch /tmp/octl-pwned)", "`id`", "a; rm -rf /", "'\"\\", "-rf", "--", "{prompt}",
                "line\nline", "#{pane_id}", "x;", "\u{0}",
            ]).prop_map(str::to_string),
        ],
        interactive in any::<bool>(),
    ) {
        let mode = if interactive { Mode::Interactive } else { Mode::Autonomous };
        let field = if interactive { "interactive" } else { "autonomous" };
        let text = toml::to_string(&json!({ "agents": { "mine": { field: template } } })).unwrap();
        let config = Config::parse(&text).unwrap();
        let profile = agents::resolve(&config, Some("mine")).unwrap();
        let launch = profile.launch(mode, &task, None).unwrap();
        let want: Vec<String> = template.iter().map(|a| a.replace("{prompt}", &task)).collect();
        prop_assert_eq!(&launch.argv, &want);
        prop_assert_eq!(launch.argv.len(), template.len());

        let claude = agents::resolve(&Config::default(), Some("claude")).unwrap();
        let l = claude.launch(mode, &task, Some(&agents::Session::new())).unwrap();
        prop_assert_eq!(l.argv.last(), Some(&task));
        prop_assert_eq!(l.argv[l.argv.len() - 2].as_str(), "--");

        let shell = agents::resolve(&Config::default(), Some("shell")).unwrap();
        prop_assert_eq!(
            shell.launch(mode, &task, None).unwrap().argv,
            vec!["sh".to_string(), "-c".to_string(), task.clone()]
        );
    }
}
