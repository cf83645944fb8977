use super::*;

#[test]
fn a_handle_names_host_attempt_copy_and_pane() {
    let h = handle_of("root@build:1", 3, 1, "%12");
    assert_eq!(h.as_str(), "ssh:3:1:%12:root@build:1");
    assert_eq!(parse_handle(&h), Some(("root@build:1", 3, 1, "%12")));
    assert_eq!(parse_handle(&AgentHandle::new("%3")), None);
    assert_eq!(parse_handle(&AgentHandle::new("slurm:4:0")), None);
}

#[test]
fn a_look_is_parsed_with_the_output_it_brings() {
    let s = SEP;
    let mut out = format!(
        "/root/.octl-remote/t/s1\n\
         9{s}%1{s}77{s}0{s}{s}{s}run{s}a{s}0.0{s}/w/a{s}/l/a.log{s}/r/a.log{s}/r/x.git\n\
         9{s}%2{s}78{s}1{s}3{s}{s}run{s}b{s}2.1{s}/w/b{s}/l/b.log{s}/r/b.log{s}/r/x.git\n\
         {s}END\nL{s}%1{s}6\n"
    )
    .into_bytes();
    out.extend_from_slice(b"a\nb\x00c\n");
    out.extend_from_slice(format!("L{s}%2{s}2\nok").as_bytes());
    let look = parse_look(&out).expect("the look ends with its marker");
    assert_eq!(look.root, "/root/.octl-remote/t/s1");
    assert_eq!(look.panes.len(), 2);
    assert!(!look.panes[0].dead && look.panes[1].dead);
    assert_eq!(look.panes[1].status, Some(3));
    assert_eq!(look.panes[1].attempt_copy(), Some((2, 1)));
    assert_eq!(look.logs["%1"], b"a\nb\x00c\n");
    assert_eq!(look.logs["%2"], b"ok");
}

/// A repository with commits `a` (the base) and `b`, and a tree for `wip` commits.
fn repo() -> (tempfile::TempDir, Git, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let git = Git::new(dir.path())
        .with_env("GIT_AUTHOR_NAME", "t")
        .with_env("GIT_AUTHOR_EMAIL", "t@t.invalid")
        .with_env("GIT_COMMITTER_NAME", "t")
        .with_env("GIT_COMMITTER_EMAIL", "t@t.invalid")
        .with_env("GIT_CONFIG_NOSYSTEM", "1")
        .with_env("GIT_CONFIG_GLOBAL", "/dev/null");
    git.plumbing(&["init", "-q"]).unwrap();
    let tree = git.plumbing(&["write-tree"]).unwrap();
    let a = git
        .plumbing(&["commit-tree", "-m", "a", tree.trim()])
        .unwrap()
        .trim()
        .to_string();
    let b = git
        .plumbing(&["commit-tree", "-p", &a, "-m", "b", tree.trim()])
        .unwrap()
        .trim()
        .to_string();
    (dir, git, a, b)
}

#[test]
fn a_start_resumes_only_from_a_copy_given_up_on() {
    let (_dir, git, a, b) = repo();
    let set = |r: &str, c: &str| git.plumbing(&["update-ref", r, c]).unwrap();
    let p0 = ref_prefix("r", "n", 0);
    // Nothing before: copy 0, from the base.
    assert_eq!(resume_point(&git, "r", "n", 0), (0, None));
    set(&format!("{p0}/0/base"), &a);
    set(&format!("{p0}/0/head"), &b);
    // Attempt 0 was not lost (a retry of a failed node, say): attempt 1 starts afresh.
    assert_eq!(resume_point(&git, "r", "n", 1), (0, None));
    // Lost: its own attempt counts the copy up and resumes from it; the next attempt too.
    set(&format!("{p0}/0/lost"), &b);
    let from_lost = Resume {
        from: format!("{p0}/0"),
        head: format!("{p0}/0/head"),
        wip: None,
    };
    assert_eq!(
        resume_point(&git, "r", "n", 0),
        (1, Some(from_lost.clone()))
    );
    assert_eq!(resume_point(&git, "r", "n", 1), (0, Some(from_lost)));
    // With a fetched wip, it goes along; without a head, the base is resumed.
    set(&format!("{p0}/0/wip"), &b);
    assert_eq!(
        resume_point(&git, "r", "n", 1).1.unwrap().wip,
        Some(format!("{p0}/0/wip"))
    );
    let p2 = ref_prefix("r", "n", 2);
    set(&format!("{p2}/0/base"), &a);
    set(&format!("{p2}/0/lost"), &a);
    assert_eq!(
        resume_point(&git, "r", "n", 3).1.unwrap().head,
        format!("{p2}/0/base")
    );
}

/// An agent that ended holds its slot until the engine has recorded its end and closed its
/// window (its entry goes), bounded for one the engine never closes.
#[test]
fn an_ended_agent_holds_its_slot_until_its_window_is_closed() {
    let placed = |alive: bool, ended_at: Option<Instant>| Placed {
        run: "r".into(),
        node: "n".into(),
        attempt: 0,
        copy: 0,
        pane: "%1".into(),
        worktree: PathBuf::from("/w"),
        log: PathBuf::from("/l"),
        remote_log: "/r".into(),
        offset: 0,
        remote_git: "/g".into(),
        pid: None,
        alive,
        ended_at,
        exit_status: None,
        exit_signal: None,
        placed: Instant::now(),
    };
    let mut h = HostState::default();
    h.agents.insert("a".into(), placed(true, None));
    h.agents
        .insert("b".into(), placed(false, Some(Instant::now())));
    assert_eq!(h.used(), 2, "ended, its end not yet taken: still its slot");
    let long_ago = Instant::now().checked_sub(DEAD_HOLDS_SLOT + Duration::from_secs(1));
    h.agents.insert("b".into(), placed(false, long_ago));
    assert_eq!(
        h.used(),
        1,
        "never closed: the slot is free again after the bound"
    );
    h.agents.remove("b");
    h.starting = 1;
    assert_eq!(h.used(), 2, "a start under way holds one");
}
