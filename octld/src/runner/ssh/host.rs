//! The SSH runner's side of each host: room and placing, setting a host up once, starting an
//! agent there, finding the agent of a start a crash cut short, fetching checkpoints.

use super::*;

impl SshRunner {
    pub fn new(name: &str, config: &SshConfig, home: &Path) -> SshRunner {
        let dir = home.join("ssh");
        let every = std::env::var("OCTL_SSH_CHECKPOINT_S")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(CHECKPOINT_S);
        let hosts: Vec<Conn> = config.hosts.iter().map(|h| Conn::new(h, &dir)).collect();
        let pass_env = config
            .pass_env
            .iter()
            .filter_map(|k| Some((k.clone(), std::env::var(k).ok()?)))
            .collect();
        SshRunner(Arc::new(Inner {
            name: name.to_string(),
            setup: hosts
                .iter()
                .map(|c| (c.host.clone(), Mutex::default()))
                .collect(),
            hosts,
            slots: config.slots.max(1),
            tag: conn::hash(home.as_os_str().as_encoded_bytes()),
            every: Duration::from_secs(every.max(1)),
            pass_env,
            state: Mutex::default(),
            looked: Condvar::new(),
            started: Condvar::new(),
        }))
    }
}

impl Inner {
    pub(super) fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn conn(&self, host: &str) -> Result<&Conn> {
        self.hosts.iter().find(|c| c.host == host).ok_or_else(|| {
            AppError::invalid(format!(
                "host {host:?} is not one of runner {:?}'s hosts (any more)",
                self.name
            ))
        })
    }

    pub(super) fn pre(&self, host: &str) -> String {
        preamble(&self.tag, host)
    }

    /// The host that should take the next agent, not in `tried`: answering (or not looked at
    /// yet), with a free slot (agents alive, starts under way and room reserved count), the
    /// least loaded first. `Err`: why none can.
    pub(super) fn choose(
        &self,
        state: &State,
        tried: &[String],
    ) -> std::result::Result<String, String> {
        let mut full = 0;
        let mut best: Option<(u32, &Conn)> = None;
        for c in self.hosts.iter().filter(|c| !tried.contains(&c.host)) {
            let h = state.hosts.get(&c.host);
            if h.is_some_and(|h| h.failed > 0) {
                continue;
            }
            let reserved = state
                .reserved
                .values()
                .filter(|(host, at)| *host == c.host && at.elapsed() < RESERVED_FOR)
                .count() as u32;
            let used = h.map_or(0, HostState::used) + reserved;
            if used >= self.slots {
                full += 1;
                continue;
            }
            if best.is_none_or(|(u, _)| used < u) {
                best = Some((used, c));
            }
        }
        if let Some((_, c)) = best {
            return Ok(c.host.clone());
        }
        Err(if full > 0 {
            format!(
                "every answering host of runner {:?} is full ({} agents each: slots)",
                self.name, self.slots
            )
        } else {
            let why: Vec<String> = state
                .hosts
                .iter()
                .filter(|(_, h)| h.failed > 0)
                .map(|(n, h)| format!("{n}: {}", h.error))
                .collect();
            format!(
                "no host of runner {:?} answers ({})",
                self.name,
                why.join("; ")
            )
        })
    }

    /// Room for the next start of `node` of `run` (see [`Runner::reserve`]): the host it goes
    /// to, held until the start takes it. Asked again, the same room.
    pub(super) fn reserve_room(&self, run: &str, node: &str) -> Room {
        let mut state = self.state();
        let key = (run.to_string(), node.to_string());
        state
            .reserved
            .retain(|_, (_, at)| at.elapsed() < RESERVED_FOR);
        if let Some((host, _)) = state.reserved.get(&key) {
            return Room::Free {
                place: Some(host.clone()),
            };
        }
        match self.choose(&state, &[]) {
            Ok(host) => {
                state.reserved.insert(key, (host.clone(), Instant::now()));
                Room::Free { place: Some(host) }
            }
            Err(why) => Room::Full(why),
        }
    }

    /// `e`, the error of a call to `host`; one that did not reach it (kind `timeout`) counts
    /// as a failed look, so the host is not taken to answer until a look says so.
    pub(super) fn failed(&self, host: &str, e: AppError) -> AppError {
        if e.kind == ErrorKind::Timeout {
            self.note_failure(host, &e);
        }
        e
    }

    /// A call that failed to reach `host` counts as a failed look.
    pub(super) fn note_failure(&self, host: &str, e: &AppError) {
        let mut state = self.state();
        let h = state.hosts.entry(host.to_string()).or_default();
        h.failed += 1;
        h.failing_since
            .get_or_insert_with(|| (Instant::now(), crate::store::writer::now_ms()));
        h.error = e.message.clone();
    }

    /// Starts `spec`'s agent: on the host its room was reserved on (or `spec.place`, after a
    /// restart), else on the next that takes it.
    pub(super) fn start_agent(&self, spec: &AgentSpec<'_>) -> Result<Started> {
        let git = Git::new(spec.cwd);
        let repo_id = repo_id(&git)?;
        let branch = git
            .plumbing(&["rev-parse", "--abbrev-ref", "HEAD"])?
            .trim()
            .to_string();
        // The copy this start is, and what it resumes from; named in the daemon's repository
        // (`…/<copy>/base`) before anything is made on a host.
        let next_copy = || -> Result<(u32, Option<Resume>, String)> {
            let (copy, resume) = resume_point(&git, spec.run, spec.node, spec.attempt);
            if let Some(r) = &resume {
                // The new worktree takes the lost copy's branch; its uncommitted work goes
                // with the base to the host.
                git.plumbing(&["reset", "-q", "--keep", &r.head])?;
            }
            let head = git.plumbing(&["rev-parse", "HEAD"])?.trim().to_string();
            let mine = format!("{}/{copy}", ref_prefix(spec.run, spec.node, spec.attempt));
            // Holds the copy's number, and is what it resumes from if it is lost before its
            // first checkpoint.
            git.plumbing(&["update-ref", &format!("{mine}/base"), &head])?;
            Ok((copy, resume, mine))
        };
        let (mut copy, mut resume, mut mine) = next_copy()?;
        let mut first = {
            let mut state = self.state();
            let key = (spec.run.to_string(), spec.node.to_string());
            let reserved = state.reserved.remove(&key).map(|(h, _)| h);
            reserved.or_else(|| spec.place.map(str::to_string))
        };
        let mut tried = Vec::new();
        let mut errors: Vec<String> = Vec::new();
        // Every host tried did not answer (or none had room): kind `timeout`, no room now (the
        // node waits); a host that answered and refused is the node's failure.
        let mut refused = false;
        loop {
            let failing = |h: &str| self.state().hosts.get(h).is_some_and(|h| h.failed > 0);
            let host = match first.take() {
                Some(h) if self.conn(&h).is_ok() && !failing(&h) => h,
                _ => {
                    let state = self.state();
                    match self.choose(&state, &tried) {
                        Ok(h) => h,
                        Err(why) if errors.is_empty() => {
                            return Err(AppError::new(ErrorKind::Timeout, why))
                        }
                        Err(_) => {
                            return Err(AppError::new(
                                if refused {
                                    ErrorKind::ToolFailed
                                } else {
                                    ErrorKind::Timeout
                                },
                                format!(
                                    "no host of runner {:?} took the agent: {}",
                                    self.name,
                                    errors.join("; ")
                                ),
                            ))
                        }
                    }
                }
            };
            tried.push(host.clone());
            {
                // At most STARTS_PER_HOST starts under way on one host.
                let mut state = self.state();
                while state.hosts.entry(host.clone()).or_default().starting >= STARTS_PER_HOST {
                    state = self
                        .started
                        .wait_timeout(state, Duration::from_secs(1))
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                state.hosts.entry(host.clone()).or_default().starting += 1;
            }
            let started = self.start_on(&host, spec, &repo_id, copy, resume.as_ref(), &branch);
            self.started.notify_all();
            let mut state = self.state();
            let h = state.hosts.entry(host.clone()).or_default();
            h.starting = h.starting.saturating_sub(1);
            match started {
                Ok((placed, started)) => {
                    h.agents.insert(started.handle.as_str().to_string(), placed);
                    drop(state);
                    let from = match &resume {
                        Some(r) => format!(
                            ", resuming from the checkpoint of {} ({})",
                            r.from,
                            r.wip.as_deref().unwrap_or(&r.head)
                        ),
                        None => String::new(),
                    };
                    let _ = append_log(
                        spec.log,
                        format!(
                            "octl: attempt {} copy {copy} on ssh host {host}{from}\n",
                            spec.attempt
                        )
                        .as_bytes(),
                    );
                    return Ok(started);
                }
                Err(e) => {
                    drop(state);
                    tracing::warn!(host = %host, run = spec.run, node = spec.node, error = %e.message, "could not start an agent on an ssh host");
                    // What is set up there is made again at the next start.
                    if let Some(s) = self.setup.get(&host) {
                        *s.lock().unwrap_or_else(|e| e.into_inner()) = Setup::default();
                    }
                    if e.kind == ErrorKind::Timeout {
                        self.note_failure(&host, &e);
                        // Its window may be there all the same (the answer was cut off): that
                        // copy is given up, so it is never adopted or fetched, and is stopped
                        // once the host answers; the next host starts the next copy.
                        let _ = git.plumbing(&[
                            "update-ref",
                            &format!("{mine}/lost"),
                            &format!("{mine}/base"),
                        ]);
                        (copy, resume, mine) = next_copy()?;
                    } else {
                        refused = true;
                    }
                    errors.push(format!("{host}: {}", e.message));
                }
            }
        }
    }

    /// Sets `host` up for agents of the repository `repo_id`, once (then kept): the daemon's
    /// directory, the tools checked, the job script, the tmux server kept up when empty (pane
    /// ids are never reused while it runs), the bare repository. Its directory.
    fn set_up(&self, host: &str, repo_id: &str) -> Result<String> {
        let mut setup = self
            .setup
            .get(host)
            .ok_or_else(|| AppError::internal(format!("no setup for host {host}")))?
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let (Some(root), true) = (&setup.root, setup.repos.contains(repo_id)) {
            return Ok(root.clone());
        }
        let conn = self.conn(host)?;
        let pre = self.pre(host);
        let (script, input) = if setup.root.is_some() {
            (repo_script(&pre, repo_id), None)
        } else {
            (setup_script(&pre, repo_id), Some(SHIM.as_bytes()))
        };
        let out = conn.run(&script, input, CALL_TIMEOUT)?;
        let root = String::from_utf8_lossy(&out).trim().to_string();
        setup.root = Some(root.clone());
        setup.repos.insert(repo_id.to_string());
        Ok(root)
    }

    /// Starts the agent on `host`.
    #[allow(clippy::too_many_arguments)]
    fn start_on(
        &self,
        host: &str,
        spec: &AgentSpec<'_>,
        repo_id: &str,
        copy: u32,
        resume: Option<&Resume>,
        branch: &str,
    ) -> Result<(Placed, Started)> {
        let conn = self.conn(host)?;
        let pre = self.pre(host);
        let root = self.set_up(host, repo_id)?;
        let remote_git = format!("{root}/{repo_id}.git");
        let url = format!("ssh://{host}{remote_git}");
        let (run, node, attempt) = (spec.run, spec.node, spec.attempt);
        let base = format!("refs/octl/base/{run}/{node}/{attempt}/{copy}");
        let base_wip = format!("refs/octl/basewip/{run}/{node}/{attempt}/{copy}");
        // The base (and the checkpoint resumed from) goes to the host: the agent clones it
        // there. Pushed only when the host lacks it (see base_refs_script).
        let git = Git::new(spec.cwd);
        let commit = |rev: &str| -> Result<String> {
            Ok(git
                .plumbing(&["rev-parse", &format!("{rev}^{{commit}}")])?
                .trim()
                .to_string())
        };
        let mut refs = vec![(base.clone(), commit("HEAD")?)];
        let mut push = vec![
            "push".to_string(),
            "-q".into(),
            "--force".into(),
            url.clone(),
            format!("HEAD:{base}"),
        ];
        if let Some(wip) = resume.and_then(|r| r.wip.as_ref()) {
            refs.push((base_wip.clone(), commit(wip)?));
            push.push(format!("{wip}:{base_wip}"));
        }
        let before = base_refs_script(&remote_git, &refs);

        let clone = clone_dir(&root, run, node, attempt, copy);
        let remote_log = format!("{root}/logs/{run}.{node}.{attempt}.{copy}.log");
        let go = format!("octl-go-{run}-{node}-{attempt}-{copy}");
        let mut words: Vec<String> = vec![
            "tmux".into(),
            "-S".into(),
            format!("{root}/tmux.sock"),
            "wait-for".into(),
            go.clone(),
        ];
        let mut cmd = words.iter().map(|w| q(w)).collect::<Vec<_>>().join(" ");
        words = vec!["exec".into(), "env".into()];
        // The host's own PATH: the daemon's names this machine's directories. The variables
        // `pass_env` names come from the daemon's environment.
        words.extend(
            self.pass_env
                .iter()
                .chain(spec.env.iter().filter(|(k, _)| k != "PATH"))
                .map(|(k, v)| format!("{k}={v}")),
        );
        words.extend([
            format!("OCTL_COPY={copy}"),
            format!("OCTL_CLONE={clone}"),
            format!("OCTL_JOB={host}"),
        ]);
        if resume.is_some_and(|r| r.wip.is_some()) {
            words.push(format!("OCTL_BASE_WIP={base_wip}"));
        }
        words.extend([
            "bash".into(),
            format!("{root}/shim.sh"),
            remote_git.clone(),
            base,
            ref_prefix(run, node, attempt),
            branch.to_string(),
            self.every.as_secs().to_string(),
            "--".into(),
        ]);
        words.extend(spec.argv.iter().cloned());
        cmd.push_str("; ");
        cmd.push_str(&words.iter().map(|w| q(w)).collect::<Vec<_>>().join(" "));
        let ac = format!("{attempt}.{copy}");
        let wt = spec.cwd.display().to_string();
        let log = spec.log.display().to_string();
        let repo = Git::new(spec.cwd)
            .plumbing(&["rev-parse", "--path-format=absolute", "--git-common-dir"])?
            .trim()
            .to_string();
        let window = window_script(
            &pre,
            &cmd,
            run,
            node,
            &ac,
            &wt,
            &log,
            &remote_log,
            &remote_git,
            &repo,
            &go,
            &before,
        );
        let mut out = conn.run(&window, None, CALL_TIMEOUT)?;
        if String::from_utf8_lossy(&out).trim() == "NEEDPUSH" {
            let push: Vec<&str> = push.iter().map(String::as_str).collect();
            conn.git(spec.cwd, &push, CALL_TIMEOUT)?;
            out = conn.run(&window, None, CALL_TIMEOUT)?;
        }
        let out = String::from_utf8_lossy(&out);
        let mut f = out.split_whitespace();
        let pane = f
            .next()
            .filter(|p| p.starts_with('%'))
            .ok_or_else(|| {
                AppError::new(
                    ErrorKind::ToolFailed,
                    format!("tmux on {host} made no window: {out:?}"),
                )
            })?
            .to_string();
        let pid = f.next().and_then(|p| p.parse().ok());
        let placed = Placed {
            run: run.to_string(),
            node: node.to_string(),
            attempt,
            copy,
            pane: pane.clone(),
            worktree: spec.cwd.to_path_buf(),
            log: spec.log.to_path_buf(),
            remote_log,
            offset: 0,
            remote_git,
            pid,
            alive: true,
            ended_at: None,
            exit_status: None,
            exit_signal: None,
            placed: Instant::now(),
        };
        Ok((
            placed,
            Started {
                handle: handle_of(host, attempt, copy, &pane),
                pid: 0,
            },
        ))
    }

    /// The window of `spec`'s copy that a start cut short by a crash made (see
    /// [`Runner::find`]): looked for on `spec.place`'s host (then every host that answers),
    /// by its run, node and `<attempt>.<copy>`. If that host does not answer, the copy there
    /// is given up (marked lost: never adopted or fetched; stopped once it answers), so the
    /// start goes on as the next copy.
    pub(super) fn find_agent(&self, spec: &AgentSpec<'_>) -> Result<Option<Started>> {
        let git = Git::new(spec.cwd);
        let (copy, _) = resume_point(&git, spec.run, spec.node, spec.attempt);
        let mine = format!("{}/{copy}", ref_prefix(spec.run, spec.node, spec.attempt));
        if !has_commit(&git, &format!("{mine}/base")) {
            // The start never got as far as naming its copy: nothing was made on a host.
            return Ok(None);
        }
        let ac = format!("{}.{copy}", spec.attempt);
        let mut hosts: Vec<&Conn> = self.hosts.iter().collect();
        hosts.sort_by_key(|c| Some(c.host.as_str()) != spec.place);
        for c in hosts {
            match self.look(&c.host, &Ask::default()) {
                Ok(look) => {
                    let found = look
                        .panes
                        .iter()
                        .find(|p| p.run == spec.run && p.node == spec.node && p.ac == ac)
                        .map(|p| p.pane.clone());
                    // Taken in as any look: the window found is adopted (its options name it).
                    self.take(&c.host, Ok(look), Instant::now());
                    if let Some(pane) = found {
                        return Ok(Some(Started {
                            handle: handle_of(&c.host, spec.attempt, copy, &pane),
                            pid: 0,
                        }));
                    }
                }
                Err(e) if Some(c.host.as_str()) == spec.place => {
                    tracing::warn!(host = %c.host, run = spec.run, node = spec.node, error = %e.message, "the host of a start cut short does not answer: its copy is given up, the next one starts");
                    let _ = git.plumbing(&[
                        "update-ref",
                        &format!("{mine}/lost"),
                        &format!("{mine}/base"),
                    ]);
                    return Ok(None);
                }
                Err(_) => {}
            }
        }
        Ok(None)
    }

    /// Fetches what `placed` pushed on `host` into refs of the daemon's repository.
    pub(super) fn fetch(conn: &Conn, placed: &Placed, timeout: Duration) -> Result<()> {
        let mine = placed.prefix();
        let url = format!("ssh://{}{}", conn.host, placed.remote_git);
        conn.git(
            &placed.worktree,
            &[
                "fetch",
                "-q",
                "--no-tags",
                &url,
                &format!("+{mine}/*:{mine}/*"),
            ],
            timeout,
        )
    }

    /// Fetches the refs of the copy `mine` (`refs/octl/remote/…/<copy>`) from the host's bare
    /// repository of `git`'s repository, without its window (it is gone).
    pub(super) fn fetch_copy(&self, conn: &Conn, git: &Git, mine: &str) -> Result<()> {
        let id = repo_id(git)?;
        let root = self.set_up(&conn.host, &id)?;
        let url = format!("ssh://{}{root}/{id}.git", conn.host);
        let dir = git.plumbing(&["rev-parse", "--show-toplevel"])?;
        conn.git(
            Path::new(dir.trim()),
            &[
                "fetch",
                "-q",
                "--no-tags",
                &url,
                &format!("+{mine}/*:{mine}/*"),
            ],
            CALL_TIMEOUT,
        )
    }

    /// Fetches the checkpoints of `host`'s live agents, in the background (a look never
    /// waits for git), unless it did less than a checkpoint interval ago.
    pub(super) fn fetch_due(self: &Arc<Self>, host: &str) {
        let todo: Vec<Placed> = {
            let mut state = self.state();
            let every = self.every;
            let h = state.hosts.entry(host.to_string()).or_default();
            if h.fetching || h.failed > 0 || h.last_fetch.is_some_and(|t| t.elapsed() < every) {
                return;
            }
            let todo: Vec<Placed> = h.agents.values().filter(|a| a.alive).cloned().collect();
            if todo.is_empty() {
                return;
            }
            h.fetching = true;
            h.last_fetch = Some(Instant::now());
            todo
        };
        let (me, host) = (self.clone(), host.to_string());
        std::thread::spawn(move || {
            let Ok(conn) = me.conn(&host) else { return };
            for placed in todo {
                let handle = handle_of(&host, placed.attempt, placed.copy, &placed.pane);
                if me.state().abandoned.contains_key(handle.as_str()) {
                    continue;
                }
                if let Err(e) = Self::fetch(conn, &placed, CALL_TIMEOUT) {
                    tracing::info!(host = %host, run = %placed.run, node = %placed.node, error = %e.message, "checkpoint not fetched");
                }
            }
            me.state().hosts.entry(host).or_default().fetching = false;
        });
    }

    /// Stops every agent of `run` on the host of `conn` (TERM, their traps' checkpoints, the
    /// session closed), then fetches what they pushed. How many windows it had.
    pub(super) fn stop_run_on(&self, conn: &Conn, run: &str) -> Result<u32> {
        let host = &conn.host;
        let out = conn.run(&stop_run_script(&self.pre(host), run), None, CALL_TIMEOUT)?;
        let stopped = String::from_utf8_lossy(&out)
            .trim()
            .parse::<u32>()
            .unwrap_or(0);
        let placed: Vec<Placed> = {
            let mut state = self.state();
            let h = state.hosts.entry(host.clone()).or_default();
            let (of_run, rest) = std::mem::take(&mut h.agents)
                .into_iter()
                .partition(|(_, a)| a.run == run);
            h.agents = rest;
            h.strays.retain(|_, p| p.run != run);
            of_run.into_values().collect()
        };
        for p in placed.iter().filter(|p| p.alive) {
            if let Err(e) = Self::fetch(conn, p, CALL_TIMEOUT) {
                tracing::warn!(host = %host, run, node = %p.node, error = %e.message, "a cancelled agent's last checkpoint was not fetched");
            }
        }
        Ok(stopped)
    }
}
