use super::suggest::{did_you_mean, edit_distance};
use super::template::{parse_template, placeholder_names};
use super::*;
use crate::error::ErrorKind;

const GOOD_TOML: &str = r#"
title = "translate the docs"
prompt = "Translate {file} into {lang}; keep the formatting. Literal: {{x}}"
agent = "claude"
gate = "make check"

[[units]]
id = "fr"
vars = { file = "README.md", lang = "French", unused = "fine" }

[[units]]
id = "de"
vars = { file = "README.md", lang = "German" }
"#;

const GOOD_JSON: &str = r#"{
  "title": "translate the docs",
  "prompt": "Translate {file} into {lang}; keep the formatting. Literal: {{x}}",
  "agent": "claude",
  "gate": "make check",
  "units": [
    {"id": "fr", "vars": {"file": "README.md", "lang": "French", "unused": "fine"}},
    {"id": "de", "vars": {"file": "README.md", "lang": "German"}}
  ]
}"#;

fn manifest_problems(text: &str, format: Format) -> Vec<String> {
    parse_manifest(text, format).unwrap_err().0
}

fn plan_problems(text: &str) -> Vec<String> {
    parse_plan(text, Format::Toml).unwrap_err().0
}

#[test]
fn reserved_ids_are_refused_naming_the_field() {
    let problems = plan_problems(
            "[[nodes]]\nid = \"api\"\ntask = \"t\"\n[[nodes]]\nid = \"integration\"\ntask = \"t\"\ndeps = [\"api\"]\n",
        );
    assert_eq!(
            problems,
            ["nodes[1].id \"integration\": reserved (the daemon names an orchestrate run's integration branch octl/<RUN>/integration); choose another id"]
        );
    let problems = manifest_problems(
        "prompt = \"p\"\n[[units]]\nid = \"integration\"\n",
        Format::Toml,
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("units[0].id \"integration\": reserved"),
        "{problems:?}"
    );
    // Only the exact name: ids that contain it are fine.
    assert!(parse_plan(
        "[[nodes]]\nid = \"integration-tests\"\ntask = \"t\"\n",
        Format::Toml
    )
    .is_ok());
}

#[test]
fn good_manifest_in_both_formats_renders() {
    let m = parse_manifest(GOOD_TOML, Format::Toml).unwrap();
    assert_eq!(m, parse_manifest(GOOD_JSON, Format::Json).unwrap());
    assert_eq!(m.title.as_deref(), Some("translate the docs"));
    assert_eq!(m.agent.as_deref(), Some("claude"));
    assert_eq!(m.gate.as_deref(), Some("make check"));
    let ids: Vec<&str> = m.units.iter().map(|u| u.id.as_str()).collect();
    assert_eq!(ids, ["fr", "de"]);
    assert_eq!(
        m.render(&m.units[1]),
        "Translate README.md into German; keep the formatting. Literal: {x}"
    );
    assert_eq!(m.placeholders(), ["file", "lang"]);
    assert_eq!(m.unit("fr").unwrap().vars["lang"], "French");
}

#[test]
fn minimal_manifest_without_placeholders_needs_no_vars() {
    let m = parse_manifest(
        "prompt = \"tidy up }} {{\"\n[[units]]\nid = \"a\"\n",
        Format::Toml,
    )
    .unwrap();
    assert_eq!(m.render(&m.units[0]), "tidy up } {");
    assert_eq!(m.title, None);
    // JSON null counts as absent for optional fields.
    let m = parse_manifest(
        r#"{"prompt":"p {x}","agent":null,"units":[{"id":"a","vars":{"x":"1"}}]}"#,
        Format::Json,
    )
    .unwrap();
    assert_eq!(m.agent, None);
    assert_eq!(m.render(&m.units[0]), "p 1");
}

#[test]
fn render_substitutes_repeated_placeholders_and_keeps_values_verbatim() {
    let m = parse_manifest(
        r#"{"prompt":"{a}-{a}-{b}","units":[{"id":"u","vars":{"a":"{b}","b":"x}}"}}]}"#,
        Format::Json,
    )
    .unwrap();
    assert_eq!(m.render(&m.units[0]), "{b}-{b}-x}}");
}

#[test]
fn formats_by_path_and_name() {
    assert_eq!(Format::from_path("plan.toml").unwrap(), Format::Toml);
    assert_eq!(Format::from_path("dir.d/Plan.JSON").unwrap(), Format::Json);
    for bad in ["plan.yaml", "plan", ".toml", "dir.toml/plan", ""] {
        let err = Format::from_path(bad).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidParams);
        assert!(err.message.contains(".toml or .json"), "{}", err.message);
    }
    assert_eq!(Format::from_name("JSON").unwrap(), Format::Json);
    assert!(Format::from_name("yaml").is_err());
    assert_eq!(Format::Toml.to_string(), "toml");
}

#[test]
fn unknown_fields_everywhere_with_accepted_and_close_match() {
    let p = manifest_problems(
        r#"
promt = "x"
prompt = "Do {a}"
[[units]]
id = "a"
vars = { a = "1" }
[[units]]
id = "b"
vars = { a = "1" }
[[units]]
id = "c"
vras = { a = "1" }
"#,
        Format::Toml,
    );
    assert_eq!(
            p,
            [
                "top level: unknown field \"promt\"; accepted: title, prompt, agent, gate, runner, allow, ask, deny, units; did you mean \"prompt\"?",
                "units[2]: unknown field \"vras\"; accepted: id, vars; did you mean \"vars\"?",
                "units[2] (c): the prompt uses {a} but vars has no \"a\"; write {{a}} for a literal {a}",
            ]
        );
    assert!(p[1].starts_with("units[2]: unknown field \"vras\"; accepted: id, vars"));
}

#[test]
fn toml_problems_come_in_document_order_not_key_order() {
    let p = manifest_problems(
        "zeta = 1\nalpha = 2\nprompt = \"p\"\n[[units]]\nid = \"a\"\n",
        Format::Toml,
    );
    assert!(p[0].contains("\"zeta\""), "{p:?}");
    assert!(p[1].contains("\"alpha\""), "{p:?}");
}

#[test]
fn missing_and_empty_required_fields() {
    let p = manifest_problems("title = \"t\"\n", Format::Toml);
    assert_eq!(p.len(), 2, "{p:?}");
    assert!(p[0].starts_with("missing field \"prompt\""), "{p:?}");
    assert!(p[1].starts_with("missing field \"units\""), "{p:?}");

    let p = manifest_problems(r#"{"prompt":"  ","units":[]}"#, Format::Json);
    assert_eq!(
        p,
        [
            "prompt: empty; write the template every unit renders",
            "units: empty; list at least one unit",
        ]
    );

    let p = manifest_problems(
        r#"{"prompt":3,"units":{"id":"a"},"agent":"Claude","gate":" "}"#,
        Format::Json,
    );
    assert_eq!(
            p,
            [
                "prompt: must be a string, got a number",
                "units: must be an array of objects, got an object",
                "agent \"Claude\": use 1-63 of a-z, 0-9 and '-', starting with a letter or digit (the name of an agent profile)",
                "gate: empty; give a shell command, or leave the field out for no gate",
            ]
        );
}

#[test]
fn unit_ids_invalid_missing_and_duplicate() {
    let p = manifest_problems(
        r#"
prompt = "p"
[[units]]
id = "fr"
[[units]]
id = "Bad_Id"
[[units]]
vars = {}
[[units]]
id = 7
[[units]]
id = "fr"
"#,
        Format::Toml,
    );
    assert_eq!(
        p,
        [
            "units[1].id \"Bad_Id\": use 1-63 of a-z, 0-9 and '-', starting with a letter or digit",
            "units[2]: missing field \"id\"",
            "units[3].id: must be a string, got a number",
            "units[4].id \"fr\": duplicate; units[0] has the same id",
        ]
    );
}

#[test]
fn unfilled_placeholders_per_unit_and_unused_vars_are_fine() {
    let p = manifest_problems(
        r#"
prompt = "Translate {file} into {lang}, {lang} again"
[[units]]
id = "fr"
vars = { file = "README.md", extra = "unused" }
[[units]]
id = "de"
[[units]]
id = "it"
vars = { file = "a", lang = "Italian", more = "unused" }
"#,
        Format::Toml,
    );
    assert_eq!(
        p,
        [
            "units[0] (fr): the prompt uses {lang} but vars has no \"lang\"; write {{lang}} for a literal {lang}",
            "units[1] (de): the prompt uses {file} but vars has no \"file\"; write {{file}} for a literal {file}",
            "units[1] (de): the prompt uses {lang} but vars has no \"lang\"; write {{lang}} for a literal {lang}",
        ]
    );
}

#[test]
fn vars_take_strings_only() {
    let p = manifest_problems(
        r#"
prompt = "n={n} ok={ok}"
[[units]]
id = "a"
vars = { n = 3, ok = true }
[[units]]
id = "b"
vars = ["n"]
"#,
        Format::Toml,
    );
    assert_eq!(
            p,
            [
                "units[0].vars.n: must be a string, got a number; vars take strings only, so quote it",
                "units[0].vars.ok: must be a string, got a boolean; vars take strings only, so quote it",
                "units[1].vars: must be a table of strings, got an array",
            ]
        );
    let p = manifest_problems(
        r#"{"prompt":"{n}","units":[{"id":"a","vars":{"n":null}},"b"]}"#,
        Format::Json,
    );
    assert_eq!(
        p,
        [
            "units[0].vars.n: must be a string, got null; vars take strings only, so quote it",
            "units[1]: must be an object, got a string",
        ]
    );
}

#[test]
fn malformed_placeholders_are_each_reported() {
    let p = manifest_problems(
            "prompt = \"a {bad name} b {} c } d {open e {ok} {{fine}}\"\n[[units]]\nid = \"u\"\nvars = { ok = \"1\" }\n",
            Format::Toml,
        );
    assert_eq!(p.len(), 4, "{p:?}");
    assert!(
        p[0].starts_with(
            "prompt: malformed placeholder \"{bad name}\" at character 3; a placeholder is {name}"
        ),
        "{p:?}"
    );
    assert!(
        p[1].starts_with("prompt: malformed placeholder \"{}\" at character 16"),
        "{p:?}"
    );
    assert_eq!(
        p[2],
        "prompt: lone \"}\" at character 21; write }} for a literal brace"
    );
    assert!(
        p[3].starts_with("prompt: \"{\" at character 25 is never closed"),
        "{p:?}"
    );
    assert!(
        p[3].ends_with("write {{ or }} for a literal brace"),
        "{p:?}"
    );

    let p = manifest_problems("prompt = \"tail {\"\n[[units]]\nid = \"u\"\n", Format::Toml);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].contains("character 6 is never closed"), "{p:?}");

    // A unit still has to fill the well-formed placeholders of a prompt with a bad one.
    let p = manifest_problems(
        "prompt = \"{a} {b c}\"\n[[units]]\nid = \"u\"\n",
        Format::Toml,
    );
    assert_eq!(p.len(), 2, "{p:?}");
    assert_eq!(
        p[1],
        "units[0] (u): the prompt uses {a} but vars has no \"a\"; write {{a}} for a literal {a}"
    );
}

#[test]
fn placeholder_name_rules() {
    let (segs, errs) = parse_template("{a_b-9}{Z}");
    assert!(errs.is_empty());
    assert_eq!(placeholder_names(&segs), ["a_b-9", "Z"]);
    let long = "x".repeat(65);
    assert_eq!(parse_template(&format!("{{{long}}}")).1.len(), 1);
    assert_eq!(parse_template("{é}").1.len(), 1);
}

#[test]
fn manifest_limits() {
    let mut text = String::from("prompt = \"p\"\n");
    for i in 0..=MAX_UNITS {
        text.push_str(&format!("[[units]]\nid = \"u{i}\"\n"));
    }
    assert_eq!(
        manifest_problems(&text, Format::Toml),
        ["units: 1001 units; at most 1000"]
    );
    let mut ok = String::from("prompt = \"p\"\n");
    for i in 0..MAX_UNITS {
        ok.push_str(&format!("[[units]]\nid = \"u{i}\"\n"));
    }
    assert_eq!(parse_manifest(&ok, Format::Toml).unwrap().units.len(), 1000);

    let big = "x".repeat(MAX_PROMPT_BYTES + 1);
    let p = manifest_problems(
        &format!("prompt = \"{big}\"\n[[units]]\nid = \"u\"\n"),
        Format::Toml,
    );
    assert_eq!(p, ["prompt: 32769 bytes; at most 32768 (32 KiB)"]);

    let half = "x".repeat(MAX_PROMPT_BYTES / 2);
    let p = manifest_problems(
            &format!(
                "prompt = \"{half}{{v}}\"\n[[units]]\nid = \"small\"\nvars = {{ v = \"y\" }}\n[[units]]\nid = \"big\"\nvars = {{ v = \"{half}xx\" }}\n"
            ),
            Format::Toml,
        );
    assert_eq!(
        p,
        [format!(
            "units[1] (big): the rendered prompt is {} bytes; at most 32768 (32 KiB)",
            MAX_PROMPT_BYTES + 2
        )]
    );
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].starts_with("units[1] (big): the rendered prompt is "),
        "{p:?}"
    );
}

#[test]
fn syntax_errors_are_one_problem_with_line_and_column() {
    let p = manifest_problems("prompt = \"p\"\n[[units]]\nid = \n", Format::Toml);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].starts_with("TOML syntax error at line 3, column "),
        "{p:?}"
    );
    assert!(!p[0].contains('\n'));

    let p = manifest_problems("{\n  \"prompt\": \"p\",\n  \"units\": [,]\n}", Format::Json);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].starts_with("JSON syntax error at line 3, column 13: "),
        "{p:?}"
    );
    assert!(!p[0].ends_with("column 13"), "{p:?}");

    let p = manifest_problems("", Format::Json);
    assert!(p[0].starts_with("JSON syntax error at line 1"), "{p:?}");
    let p = manifest_problems("[1]", Format::Json);
    assert_eq!(p, ["the manifest must be an object, got an array"]);

    // Keys repeated in TOML are the TOML parser's to refuse; in JSON they are ours.
    let p = manifest_problems("prompt = \"a\"\nprompt = \"b\"\n", Format::Toml);
    assert_eq!(
        p,
        ["TOML syntax error at line 2, column 1: duplicate key (at \"prompt\")"]
    );
    let p = manifest_problems(
        r#"{"prompt":"a","prompt":"b","units":[{"id":"a","vars":{"x":"1","x":"2"}}]}"#,
        Format::Json,
    );
    assert_eq!(
        p,
        [
            "top level: field \"prompt\" is given twice",
            "units[0].vars: duplicate key \"x\"",
        ]
    );
}

#[test]
fn four_different_manifest_problems_reported_together() {
    let text = r#"
prompt = "Translate {file} into {lang}"
[[units]]
id = "fr"
vars = { file = "README.md", lang = "French" }
[[units]]
id = "Bad_Id"
vars = { file = "README.md", lang = "German" }
[[units]]
id = "fr"
vars = { file = "a", lang = "b" }
[[units]]
id = "it"
vras = { file = "a", lang = "b" }
vars = { file = "a" }
"#;
    let problems = parse_manifest(text, Format::Toml).unwrap_err();
    assert_eq!(
        problems.0,
        [
            "units[1].id \"Bad_Id\": use 1-63 of a-z, 0-9 and '-', starting with a letter or digit",
            "units[2].id \"fr\": duplicate; units[0] has the same id",
            "units[3]: unknown field \"vras\"; accepted: id, vars; did you mean \"vars\"?",
            "units[3] (it): the prompt uses {lang} but vars has no \"lang\"; write {{lang}} for a literal {lang}",
        ]
    );
    let err = problems.into_error("manifest plan.toml");
    assert_eq!(err.kind, ErrorKind::InvalidParams);
    assert_eq!(
            err.message,
            "invalid manifest plan.toml: 4 problems:\n  - units[1].id \"Bad_Id\": use 1-63 of a-z, 0-9 and '-', starting with a letter or digit\n  - units[2].id \"fr\": duplicate; units[0] has the same id\n  - units[3]: unknown field \"vras\"; accepted: id, vars; did you mean \"vars\"?\n  - units[3] (it): the prompt uses {lang} but vars has no \"lang\"; write {{lang}} for a literal {lang}"
        );
}

#[test]
fn problems_into_error_counts_and_caps() {
    let one = Problems(vec!["x".into()]).into_error("plan p.json");
    assert_eq!(one.message, "invalid plan p.json: 1 problem:\n  - x");
    let many = Problems((0..105).map(|i| format!("p{i}")).collect());
    assert_eq!(many.len(), 105);
    assert_eq!(many.to_string().lines().count(), 105);
    let msg = many.into_error("plan p.json").message;
    assert!(msg.starts_with("invalid plan p.json: 105 problems:\n  - p0\n"));
    assert!(msg.contains("\n  - p99\n  - … and 5 more"), "{msg}");
    assert!(!msg.contains("p100"));
}

const DIAMOND: &str = r#"
title = "payments v2"
[[nodes]]
id = "d"
task = "integrate"
deps = ["b", "c"]
gate = "cargo test"
[[nodes]]
id = "c"
task = "web"
deps = ["a"]
[[nodes]]
id = "b"
task = "api"
deps = ["a"]
agent = "shell"
[[nodes]]
id = "a"
task = "schema"
"#;

#[test]
fn diamond_plan_order_and_dependents() {
    let plan = parse_plan(DIAMOND, Format::Toml).unwrap();
    assert_eq!(plan.title.as_deref(), Some("payments v2"));
    let ids: Vec<&str> = plan.nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids, ["d", "c", "b", "a"], "document order kept");
    assert_eq!(
        plan.order(),
        ["a", "c", "b", "d"],
        "stable by document order"
    );
    assert_eq!(plan.dependents("a"), ["d", "c", "b"]);
    assert_eq!(plan.dependents("b"), ["d"]);
    assert!(plan.dependents("d").is_empty());
    assert!(plan.dependents("nope").is_empty());
    let d = plan.node("d").unwrap();
    assert_eq!(d.deps, ["b", "c"]);
    assert_eq!(d.gate.as_deref(), Some("cargo test"));
    assert_eq!(plan.node("b").unwrap().agent.as_deref(), Some("shell"));
    assert!(plan.node("a").unwrap().deps.is_empty());

    let plan = parse_plan(
        r#"{"nodes":[{"id":"a","task":"A"},{"id":"b","task":"B","deps":["a"]},
                {"id":"c","task":"C","deps":["a"]},{"id":"d","task":"D","deps":["b","c"]}]}"#,
        Format::Json,
    )
    .unwrap();
    assert_eq!(plan.order(), ["a", "b", "c", "d"]);
    assert_eq!(plan.dependents("b"), ["d"]);
    assert_eq!(plan.dependents("a"), ["b", "c", "d"]);
}

#[test]
fn order_prefers_earlier_nodes_among_the_ready() {
    let plan = parse_plan(
        r#"
[[nodes]]
id = "x"
task = "x"
deps = ["z"]
[[nodes]]
id = "y"
task = "y"
[[nodes]]
id = "z"
task = "z"
"#,
        Format::Toml,
    )
    .unwrap();
    assert_eq!(plan.order(), ["y", "z", "x"]);
}

#[test]
fn cycle_and_unknown_dep_reported_together() {
    let p = plan_problems(
        r#"
[[nodes]]
id = "a"
task = "A"
deps = ["c"]
[[nodes]]
id = "b"
task = "B"
deps = ["a"]
[[nodes]]
id = "c"
task = "C"
deps = ["b"]
[[nodes]]
id = "deploy"
task = "ship"
deps = ["tset", "a"]
"#,
    );
    assert_eq!(
        p,
        [
            "nodes[3] (deploy): unknown dep \"tset\"; known: a, b, c, deploy",
            "cycle: a → b → c → a (each node depends on the one before it)",
        ]
    );
    let err = Problems(p).into_error("plan plan.toml");
    assert!(err
        .message
        .starts_with("invalid plan plan.toml: 2 problems:\n  - "));
}

#[test]
fn unknown_dep_suggests_a_close_id() {
    let p = plan_problems(
        r#"
[[nodes]]
id = "api"
task = "A"
[[nodes]]
id = "web"
task = "W"
[[nodes]]
id = "deploy"
task = "D"
deps = ["tset"]
[[nodes]]
id = "test"
task = "T"
"#,
    );
    assert_eq!(
            p,
            ["nodes[2] (deploy): unknown dep \"tset\"; known: api, web, deploy, test; did you mean \"test\"?"]
        );
}

#[test]
fn every_cycle_is_named_and_self_loops_apart() {
    let p = plan_problems(
        r#"
[[nodes]]
id = "a"
task = "A"
deps = ["b"]
[[nodes]]
id = "b"
task = "B"
deps = ["a"]
[[nodes]]
id = "s"
task = "S"
deps = ["s"]
[[nodes]]
id = "x"
task = "X"
deps = ["y", "a"]
[[nodes]]
id = "y"
task = "Y"
deps = ["x"]
"#,
    );
    assert_eq!(
        p,
        [
            "nodes[2] (s): depends on itself",
            "cycle: a → b → a (each node depends on the one before it)",
            "cycle: x → y → x (each node depends on the one before it)",
        ]
    );
}

#[test]
fn a_component_of_several_cycles_names_them_all() {
    // a ⇄ b and a ⇄ c: one strongly connected component, no single cycle through all three.
    let p = plan_problems(
        r#"
[[nodes]]
id = "a"
task = "A"
deps = ["b", "c"]
[[nodes]]
id = "b"
task = "B"
deps = ["a"]
[[nodes]]
id = "c"
task = "C"
deps = ["a"]
"#,
    );
    assert_eq!(
        p,
        ["cycles among a, b, c: a → b → a; c → a → c (each node depends on the one before it)"]
    );
}

#[test]
fn plan_node_problems() {
    let p = plan_problems(
        r#"
titel = "x"
[[nodes]]
id = "a"
task = ""
deps = "b"
[[nodes]]
id = "a"
task = "again"
[[nodes]]
task = "no id"
agent = "Bad"
gate = ""
[[nodes]]
id = "b"
tsak = "typo"
deps = ["a", "a", 3]
"#,
    );
    assert_eq!(
            p,
            [
                "top level: unknown field \"titel\"; accepted: title, nodes; did you mean \"title\"?",
                "nodes[0].task: empty; say what the node's agent is to do",
                "nodes[0].deps: must be an array of node ids, got a string",
                "nodes[1].id \"a\": duplicate; nodes[0] has the same id",
                "nodes[2].agent \"Bad\": use 1-63 of a-z, 0-9 and '-', starting with a letter or digit (the name of an agent profile)",
                "nodes[2].gate: empty; give a shell command, or leave the field out for no gate",
                "nodes[2]: missing field \"id\"",
                "nodes[3]: unknown field \"tsak\"; accepted: id, task, deps, agent, gate, runner, allow, ask, deny, sandbox; did you mean \"task\"?",
                "nodes[3] (b): dep \"a\" is listed twice",
                "nodes[3].deps[2]: must be a string (a node id), got a number",
                "nodes[3]: missing field \"task\": say what the node's agent is to do",
            ]
        );
}

#[test]
fn plan_missing_empty_and_too_many_nodes() {
    assert_eq!(
        plan_problems("title = \"t\"\n"),
        ["missing field \"nodes\": list at least one node, each a table with an id and a task"]
    );
    assert_eq!(
        parse_plan(r#"{"nodes":[]}"#, Format::Json).unwrap_err().0,
        ["nodes: empty; list at least one node"]
    );
    let mut text = String::new();
    for i in 0..=MAX_NODES {
        let dep = if i > 0 {
            format!("deps = [\"n{}\"]\n", i - 1)
        } else {
            String::new()
        };
        text.push_str(&format!("[[nodes]]\nid = \"n{i}\"\ntask = \"t\"\n{dep}"));
    }
    assert_eq!(plan_problems(&text), ["nodes: 501 nodes; at most 500"]);
    let p = plan_problems(&format!(
        "[[nodes]]\nid = \"a\"\ntask = \"{}\"\n",
        "x".repeat(MAX_TASK_BYTES + 1)
    ));
    assert_eq!(p, ["nodes[0].task: 32769 bytes; at most 32768 (32 KiB)"]);
}

#[test]
fn a_long_chain_has_no_false_cycles_and_orders_fully() {
    let mut text = String::new();
    for i in 0..MAX_NODES {
        let dep = if i > 0 {
            format!("deps = [\"n{}\"]\n", i - 1)
        } else {
            String::new()
        };
        text.push_str(&format!("[[nodes]]\nid = \"n{i}\"\ntask = \"t\"\n{dep}"));
    }
    let plan = parse_plan(&text, Format::Toml).unwrap();
    assert_eq!(plan.order().len(), MAX_NODES);
    assert_eq!(plan.order()[MAX_NODES - 1], "n499");
    assert_eq!(plan.dependents("n0").len(), MAX_NODES - 1);
    // and a cycle through all of them is one problem naming all of them
    text = text.replacen("task = \"t\"\n", "task = \"t\"\ndeps = [\"n499\"]\n", 1);
    let p = plan_problems(&text);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].starts_with("cycle: n0 → n1 → n2 → "), "{p:?}");
    assert!(p[0].contains("n499 → n0 (each"), "{p:?}");
}

#[test]
fn max_parallel_values() {
    assert_eq!(parse_max_parallel("auto").unwrap(), MaxParallel::Auto);
    assert_eq!(parse_max_parallel("AUTO").unwrap(), MaxParallel::Auto);
    assert_eq!(parse_max_parallel("1").unwrap(), MaxParallel::N(1));
    assert_eq!(parse_max_parallel("1000").unwrap(), MaxParallel::N(1000));
    for bad in ["0", "1001", "-1", "+3", "", "two", "3.5"] {
        let err = parse_max_parallel(bad).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidParams);
        assert_eq!(
            err.message,
            format!("invalid --max-parallel {bad:?}: use a number from 1 to 1000, auto, or cluster (a Slurm runner's)")
        );
    }
    assert_eq!(MaxParallel::default(), MaxParallel::Auto);
    assert_eq!(MaxParallel::N(3).to_string(), "3");
    assert_eq!(
        serde_json::to_string(&MaxParallel::Auto).unwrap(),
        "\"auto\""
    );
    assert_eq!(serde_json::to_string(&MaxParallel::N(8)).unwrap(), "8");
    let v: MaxParallel = serde_json::from_str("8").unwrap();
    assert_eq!(v, MaxParallel::N(8));
    let v: MaxParallel = serde_json::from_str("\"auto\"").unwrap();
    assert_eq!(v, MaxParallel::Auto);
    assert!(serde_json::from_str::<MaxParallel>("0").is_err());
    assert!(MaxParallel::from_json(&serde_json::json!(true)).is_err());
    assert_eq!(
        MaxParallel::from_json(&serde_json::json!("12")).unwrap(),
        MaxParallel::N(12)
    );
}

#[test]
fn parsed_values_round_trip_through_json() {
    let m = parse_manifest(GOOD_TOML, Format::Toml).unwrap();
    let back: Manifest = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
    assert_eq!(back, m);
    let plan = parse_plan(DIAMOND, Format::Toml).unwrap();
    let back: Plan = serde_json::from_str(&serde_json::to_string(&plan).unwrap()).unwrap();
    assert_eq!(back, plan);
}

#[test]
fn close_matches() {
    assert_eq!(edit_distance("tset", "test"), 1);
    assert_eq!(edit_distance("vras", "vars"), 1);
    assert_eq!(did_you_mean("zzz", &["api", "web"]), None);
    assert_eq!(did_you_mean("x", &["y"]), None);
}

#[test]
fn manifests_and_plan_nodes_name_a_runner() {
    let m = parse_manifest(
        "prompt = \"x\"\nrunner = \"hpc\"\n[[units]]\nid = \"a\"\n",
        Format::Toml,
    )
    .unwrap();
    assert_eq!(m.runner.as_deref(), Some("hpc"));
    let p = parse_plan(
        "[[nodes]]\nid = \"a\"\ntask = \"t\"\nrunner = \"big\"\n[[nodes]]\nid = \"b\"\ntask = \"t\"\n",
        Format::Toml,
    )
    .unwrap();
    assert_eq!(p.nodes[0].runner.as_deref(), Some("big"));
    assert_eq!(p.nodes[1].runner, None);
    assert_eq!(
        manifest_problems("prompt = \"x\"\nrunner = \"No\"\n[[units]]\nid = \"a\"\n", Format::Toml),
        ["runner \"No\": use 1-63 of a-z, 0-9 and '-', starting with a letter or digit (the name of a runner, e.g. local)"]
    );
    assert_eq!(
        plan_problems("[[nodes]]\nid = \"a\"\ntask = \"t\"\nrunner = 3\n"),
        ["nodes[0].runner: must be a string, got a number"]
    );
}

#[test]
fn permission_rules_in_plans_and_manifests_are_read_and_bad_ones_named() {
    let plan = parse_plan(
        "[[nodes]]\nid = \"a\"\ntask = \"t\"\nallow = [\"Bash(cargo test:*)\"]\nask = [\"Edit(src/**)\"]\ndeny = [\"WebFetch\"]\n[[nodes]]\nid = \"b\"\ntask = \"t\"\n",
        Format::Toml,
    )
    .unwrap();
    let a = &plan.nodes[0].permissions;
    assert_eq!(
        (&a.allow[..], &a.ask[..], &a.deny[..]),
        (
            &["Bash(cargo test:*)".to_string()][..],
            &["Edit(src/**)".to_string()][..],
            &["WebFetch".to_string()][..]
        )
    );
    assert!(plan.nodes[1].permissions.is_empty());
    assert_eq!(
        plan_problems(
            "[[nodes]]\nid = \"a\"\ntask = \"t\"\ndeny = [\"Bash(rm\", 3]\nask = \"Edit\"\n"
        ),
        [
            "nodes[0].deny[0] \"Bash(rm\": no closing ')'; give a tool name, optionally with a specifier in parentheses, as Claude Code's permission rules are written: Bash, Bash(cargo test:*), Edit(src/**), WebFetch(domain:example.com), mcp__server__tool",
            "nodes[0].deny[1]: must be a string, got a number",
            "nodes[0].ask: must be an array of permission rules such as \"Bash(cargo test:*)\", got a string",
        ]
    );
    let m = parse_manifest(
        "prompt = \"p\"\ndeny = [\"Read(./.env)\"]\n[[units]]\nid = \"u\"\n",
        Format::Toml,
    )
    .unwrap();
    assert_eq!(m.permissions.deny, ["Read(./.env)"]);
}

#[test]
fn plan_nodes_choose_their_sandbox_and_a_bad_one_is_named() {
    let p = parse_plan(
        "[[nodes]]\nid = \"a\"\ntask = \"t\"\nsandbox = \"bwrap\"\n[[nodes]]\nid = \"b\"\ntask = \"t\"\nsandbox = \"none\"\n[[nodes]]\nid = \"c\"\ntask = \"t\"\n",
        Format::Toml,
    )
    .unwrap();
    let kinds: Vec<_> = p.nodes.iter().map(|n| n.sandbox).collect();
    assert_eq!(
        kinds,
        [
            Some(crate::sandbox::SandboxKind::Bwrap),
            Some(crate::sandbox::SandboxKind::None),
            None
        ]
    );
    assert_eq!(
        plan_problems("[[nodes]]\nid = \"a\"\ntask = \"t\"\nsandbox = \"docker\"\n"),
        ["nodes[0].sandbox: \"docker\" is not a sandbox; accepted: bwrap, none"]
    );
    assert_eq!(
        plan_problems("[[nodes]]\nid = \"a\"\ntask = \"t\"\nsandbox = true\n"),
        ["nodes[0].sandbox: must be a string, got a boolean"]
    );
}
