//! The SSH runner's side of each host: connections, placing and starting an agent on a
//! host, fetching its checkpoints, and the looks (one batched call per host per tick).

use super::*;
impl SshRunner {
    pub fn new(name: &str, config: &RunnerConfig, home: &Path) -> SshRunner {
        let dir = home.join("ssh");
        let every = std::env::var("OCTL_SSH_CHECKPOINT_S")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(CHECKPOINT_S);
        SshRunner {
            name: name.to_string(),
            hosts: config
                .hosts
                .iter()
                .flatten()
                .map(|h| Conn::new(h, &dir))
                .collect(),
            slots: config.slots.unwrap_or(DEFAULT_SSH_SLOTS).max(1),
            tag: conn::hash(home.as_os_str().as_encoded_bytes()),
            every: Duration::from_secs(every.max(1)),
            state: Default::default(),
        }
    }

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

    /// The host that should take the next agent, not yet in `tried`: answering (or not looked
    /// at yet), with a free slot, the least loaded first. Holds a slot on it (`starting`).
    pub(super) fn place(&self, tried: &[String]) -> Result<String> {
        let mut state = self.state();
        let mut full = 0;
        let mut best: Option<(u32, &Conn)> = None;
        for c in &self.hosts {
            if tried.contains(&c.host) {
                continue;
            }
            let h = state.hosts.entry(c.host.clone()).or_default();
            if h.failed > 0 {
                continue;
            }
            let used = h.agents.values().filter(|a| a.alive).count() as u32 + h.starting;
            if used >= self.slots {
                full += 1;
                continue;
            }
            if best.is_none_or(|(u, _)| used < u) {
                best = Some((used, c));
            }
        }
        let Some((_, c)) = best else {
            return Err(AppError::new(
                ErrorKind::ToolFailed,
                if full > 0 {
                    format!(
                        "every answering host of runner {:?} is full ({} agents each: slots); lower the run's max_parallel to hosts × slots",
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
                },
            ));
        };
        state.hosts.entry(c.host.clone()).or_default().starting += 1;
        Ok(c.host.clone())
    }

    /// A call that failed to reach `host` counts as a failed look.
    pub(super) fn note_failure(&self, host: &str, e: &AppError) {
        let mut state = self.state();
        let h = state.hosts.entry(host.to_string()).or_default();
        h.failed += 1;
        h.failing_since.get_or_insert_with(Instant::now);
        h.error = e.message.clone();
    }

    /// Starts the agent on `host`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn start_on(
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
        let prepare = format!(
            "set -e\n{pre}mkdir -p \"$R/logs\" \"$R/work\"\n\
             command -v tmux >/dev/null 2>&1 || {{ echo 'tmux is not installed on this host' >&2; exit 3; }}\n\
             command -v git >/dev/null 2>&1 || {{ echo 'git is not installed on this host' >&2; exit 3; }}\n\
             [ -d \"$R/{repo_id}.git\" ] || git init -q --bare \"$R/{repo_id}.git\"\n\
             cat > \"$R/shim.sh.$$\" && mv \"$R/shim.sh.$$\" \"$R/shim.sh\"\nprintf '%s\\n' \"$R\"\n"
        );
        let out = conn.run(&prepare, Some(SHIM.as_bytes()), CALL_TIMEOUT)?;
        let root = String::from_utf8_lossy(&out).trim().to_string();
        let remote_git = format!("{root}/{repo_id}.git");
        let url = format!("ssh://{host}{remote_git}");
        let (run, node, attempt) = (spec.run, spec.node, spec.attempt);
        let base = format!("refs/octl/base/{run}/{node}/{attempt}/{copy}");
        let base_wip = format!("refs/octl/basewip/{run}/{node}/{attempt}/{copy}");
        // The base (and the checkpoint resumed from) goes to the host: the agent clones it there.
        let mut push = vec![
            "push".to_string(),
            "-q".into(),
            "--force".into(),
            url.clone(),
            format!("HEAD:{base}"),
        ];
        if let Some(wip) = resume.and_then(|r| r.wip.as_ref()) {
            push.push(format!("{wip}:{base_wip}"));
        }
        let push: Vec<&str> = push.iter().map(String::as_str).collect();
        conn.git(spec.cwd, &push, CALL_TIMEOUT)?;

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
        // The host's own PATH: the daemon's names this machine's directories.
        words.extend(
            spec.env
                .iter()
                .filter(|(k, _)| k != "PATH")
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
        let window = format!(
            "{pre}CMD={cmd}\n\
             P=$(t new-window -d -P -F '#{{pane_id}}' -t ={run}: -n {node} -c \"$R\" /bin/sh -c \"$CMD\" 2>/dev/null) ||\n\
             P=$(t new-session -d -P -F '#{{pane_id}}' -s {run} -n {node} -x 200 -y 50 -c \"$R\" /bin/sh -c \"$CMD\" 2>/dev/null) ||\n\
             P=$(t new-window -d -P -F '#{{pane_id}}' -t ={run}: -n {node} -c \"$R\" /bin/sh -c \"$CMD\") || exit 1\n\
             t set-option -w -t \"$P\" remain-on-exit on \\; set-option -w -t \"$P\" @octl_ac {ac} \\; \
             set-option -w -t \"$P\" @octl_wt {wt} \\; set-option -w -t \"$P\" @octl_log {log} \\; \
             set-option -w -t \"$P\" @octl_rlog {rlog} \\; set-option -w -t \"$P\" @octl_git {git} \\; \
             pipe-pane -t \"$P\" -o {pipe} \\; wait-for -S {go}\n\
             t display -p -t \"$P\" '#{{pane_id}} #{{pane_pid}}'\n",
            cmd = q(&cmd),
            wt = q(&wt),
            log = q(&log),
            rlog = q(&remote_log),
            git = q(&remote_git),
            pipe = q(&format!("exec cat >> {}", q(&remote_log))),
            go = q(&go),
        );
        let out = conn.run(&window, None, CALL_TIMEOUT)?;
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

    /// Fetches the checkpoints of `host`'s live agents, in the background (a look never
    /// waits for git), unless it did less than a checkpoint interval ago.
    pub(super) fn fetch_due(&self, host: &str) {
        let Ok(conn) = self.conn(host).cloned() else {
            return;
        };
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
        let state = self.state.clone();
        let host = host.to_string();
        std::thread::spawn(move || {
            for placed in todo {
                let handle = handle_of(&host, placed.attempt, placed.copy, &placed.pane);
                let given_up = state
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .lost
                    .contains_key(handle.as_str());
                if given_up {
                    continue;
                }
                if let Err(e) = Self::fetch(&conn, &placed, CALL_TIMEOUT) {
                    tracing::info!(host = %host, run = %placed.run, node = %placed.node, error = %e.message, "checkpoint not fetched");
                }
            }
            let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
            state.hosts.entry(host).or_default().fetching = false;
        });
    }

    /// What the next look at `host` asks, from what the runner knows.
    pub(super) fn ask(&self, host: &str) -> Ask {
        let state = self.state();
        let mut ask = Ask::default();
        if let Some(h) = state.hosts.get(host) {
            for a in h.agents.values() {
                ask.logs
                    .push((a.pane.clone(), a.remote_log.clone(), a.offset));
            }
        }
        for l in state.lost.values() {
            if let Some((lh, attempt, copy, pane)) = parse_handle(&l.handle) {
                if lh == host {
                    ask.close.push((
                        pane.to_string(),
                        format!("{attempt}.{copy}|{}|{}", l.run, l.node),
                    ));
                }
            }
        }
        ask
    }

    /// Takes in one look at `host` (or its failure).
    pub(super) fn take(&self, host: &str, look: Result<Look>, began: Instant) {
        take(&self.state, host, look, began)
    }

    /// One look at `host`.
    pub(super) fn look(&self, host: &str, ask: &Ask) -> Result<Look> {
        look(self.conn(host)?, &self.pre(host), ask)
    }

    /// Whether `host` was given up (its agents lost): it is then looked at in the background,
    /// every [`PROBE_EVERY`], so that its bounded but slow failures do not hold up the looks
    /// at the others. Starts that look when due.
    pub(super) fn probe_in_background(&self, host: &str) -> bool {
        let Ok(conn) = self.conn(host).cloned() else {
            return false;
        };
        {
            let mut state = self.state();
            let h = state.hosts.entry(host.to_string()).or_default();
            if h.failed < LOST_AFTER || !h.agents.is_empty() {
                return false;
            }
            if h.probing || h.last_probe.is_some_and(|t| t.elapsed() < PROBE_EVERY) {
                return true;
            }
            h.probing = true;
            h.last_probe = Some(Instant::now());
        }
        let (state, pre, ask, host) = (
            self.state.clone(),
            self.pre(host),
            self.ask(host),
            host.to_string(),
        );
        std::thread::spawn(move || {
            let began = Instant::now();
            let answer = look(&conn, &pre, &ask);
            take(&state, &host, answer, began);
            let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
            state.hosts.entry(host).or_default().probing = false;
        });
        true
    }

    /// Looks at every host at once, and takes the answers in.
    pub(super) fn look_all(&self) -> bool {
        let asks: Vec<(String, Ask)> = self
            .hosts
            .iter()
            .filter(|c| !self.probe_in_background(&c.host))
            .map(|c| (c.host.clone(), self.ask(&c.host)))
            .collect();
        let began = Instant::now();
        let looks: Vec<(String, Result<Look>)> = std::thread::scope(|s| {
            let running: Vec<_> = asks
                .iter()
                .map(|(host, ask)| (host, s.spawn(move || self.look(host, ask))))
                .collect();
            running
                .into_iter()
                .map(|(host, j)| {
                    (
                        host.clone(),
                        j.join()
                            .unwrap_or_else(|_| Err(AppError::internal("a look panicked"))),
                    )
                })
                .collect()
        });
        let mut unsure = false;
        for (host, look) in looks {
            self.take(&host, look, began);
            let state = self.state();
            let h = &state.hosts[&host];
            // A host whose agents are not known yet (never answered since this daemon
            // started) makes the look unsure until it is given up.
            if !h.answered && h.failed > 0 && h.failed < LOST_AFTER {
                unsure = true;
            }
            drop(state);
            self.fetch_due(&host);
        }
        !unsure
    }
}
