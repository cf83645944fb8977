//! The looks at the hosts, each in the background, and taking their answers in: which agents
//! a host still has, their output, windows of a restarted daemon's to adopt, and what is to
//! be stopped once a host answers (copies given up on, runs cancelled while it did not).

use super::*;

/// What [`adopt`] makes of a window the runner does not know.
pub(super) enum Adopted {
    /// A copy of a live node's: it is that node's agent again.
    Yes(Box<Placed>),
    /// A copy given up on (marked lost in the daemon's repository): to be stopped.
    GivenUp,
    /// Nobody's (its worktree is gone): a stray, for orphans.
    No,
}

impl Inner {
    /// Starts a look at every host that is due for one (one look at a time per host; a host
    /// whose last look failed, once per [`PROBE_EVERY`]), and waits up to [`OBSERVE_WAIT`]
    /// for those of hosts whose last look answered: a host that does not answer holds up
    /// neither the others nor the caller.
    pub(super) fn look_all(self: &Arc<Self>) {
        let mut waiting: Vec<(String, u64)> = Vec::new();
        {
            let mut state = self.state();
            for c in &self.hosts {
                let h = state.hosts.entry(c.host.clone()).or_default();
                let pause = if h.failed > 0 {
                    PROBE_EVERY
                } else {
                    Duration::ZERO
                };
                if !h.looking && h.looked_at.is_none_or(|t| t.elapsed() >= pause) {
                    h.looking = true;
                    let me = self.clone();
                    let host = c.host.clone();
                    std::thread::spawn(move || me.look_in_background(&host));
                }
                if h.looking && h.failed == 0 {
                    waiting.push((c.host.clone(), h.looks));
                }
            }
        }
        let deadline = Instant::now() + OBSERVE_WAIT;
        let mut state = self.state();
        loop {
            let done = waiting
                .iter()
                .all(|(h, n)| state.hosts.get(h).is_none_or(|h| h.looks > *n));
            let left = deadline.saturating_duration_since(Instant::now());
            if done || left.is_zero() {
                return;
            }
            state = self
                .looked
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// One look at `host`, taken in; then what is due once it answered: the checkpoints'
    /// fetch, stopping what is to be stopped there.
    fn look_in_background(self: &Arc<Self>, host: &str) {
        let began = Instant::now();
        let ask = self.ask(host);
        let answer = self.look(host, &ask);
        let answered = answer.is_ok();
        self.take(host, answer, began);
        {
            let mut state = self.state();
            let h = state.hosts.entry(host.to_string()).or_default();
            h.looking = false;
            h.looked_at = Some(Instant::now());
            h.looks += 1;
        }
        self.looked.notify_all();
        if answered {
            self.fetch_due(host);
            self.stop_due(host);
        }
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
        ask
    }

    /// One look at `host`.
    pub(super) fn look(&self, host: &str, ask: &Ask) -> Result<Look> {
        let conn = self.conn(host)?;
        let out = conn.run(&look_script(&self.pre(host), ask), None, LOOK_TIMEOUT)?;
        parse_look(&out).ok_or_else(|| {
            AppError::new(
                ErrorKind::ToolFailed,
                format!("on {host}: the look's answer was cut short"),
            )
        })
    }

    /// Takes in one look at `host` (or its failure). A failed look changes nothing of what is
    /// known of the host's agents: only that it failed, since when, and why.
    pub(super) fn take(&self, host: &str, look: Result<Look>, began: Instant) {
        let mut state = self.state();
        let State {
            hosts, abandoned, ..
        } = &mut *state;
        let h = hosts.entry(host.to_string()).or_default();
        let look = match look {
            Ok(l) => l,
            Err(e) => {
                tracing::debug!(host, error = %e.message, "an ssh host did not answer a look");
                h.failed += 1;
                h.failing_since
                    .get_or_insert_with(|| (Instant::now(), crate::store::writer::now_ms()));
                h.error = e.message.clone();
                return;
            }
        };
        if h.failed >= LOST_AFTER {
            tracing::info!(host, failed = h.failed, "an ssh host answers again");
        }
        h.failed = 0;
        h.failing_since = None;
        h.answered = true;
        h.root = Some(look.root.clone());
        let mut seen = BTreeMap::new();
        let mut strays = BTreeMap::new();
        for p in &look.panes {
            let Some((attempt, copy)) = p.attempt_copy() else {
                continue;
            };
            let handle = handle_of(host, attempt, copy, &p.pane).into_string();
            if abandoned.contains_key(&handle) {
                continue;
            }
            // Known to be nobody's already: not asked about again at every look.
            if let Some(stray) = h.strays.remove(&handle) {
                strays.insert(handle, stray);
                continue;
            }
            let entry = match h.agents.remove(&handle) {
                Some(a) => a,
                // A window made before this daemon started: adopted, unless its copy was
                // given up on (the mark in the daemon's repository says so).
                None => match adopt(p, attempt, copy) {
                    Adopted::Yes(a) => *a,
                    Adopted::GivenUp => {
                        abandoned.insert(
                            handle,
                            Abandoned {
                                run: p.run.clone(),
                                node: p.node.clone(),
                                pane: p.pane.clone(),
                                ac: p.ac.clone(),
                                stopping: false,
                            },
                        );
                        continue;
                    }
                    Adopted::No => {
                        strays.insert(handle, p.clone());
                        continue;
                    }
                },
            };
            let mut a = entry;
            a.pid = p.pid.or(a.pid);
            a.alive = !p.dead;
            if p.dead {
                a.ended_at.get_or_insert_with(Instant::now);
            }
            a.exit_status = p.status;
            a.exit_signal = p.signal;
            let _ = p.server_pid;
            if let Some(bytes) = look.logs.get(&p.pane) {
                if append_log(&a.log, bytes).is_ok() {
                    a.offset += bytes.len() as u64;
                }
            }
            seen.insert(handle, a);
        }
        // Windows no longer listed are gone (closed, or the server died): not reported.
        // Agents started while the look ran are not in it yet.
        let (newer, _gone): (BTreeMap<_, _>, BTreeMap<_, _>) = std::mem::take(&mut h.agents)
            .into_iter()
            .partition(|(_, a)| a.placed > began);
        seen.extend(newer);
        h.agents = seen;
        h.strays = strays;
        // Copies given up on whose window is no longer there need stopping no more.
        let listed: BTreeSet<String> = look
            .panes
            .iter()
            .filter_map(|p| {
                let (a, c) = p.attempt_copy()?;
                Some(handle_of(host, a, c, &p.pane).into_string())
            })
            .collect();
        abandoned.retain(|handle, a| {
            a.stopping
                || listed.contains(handle)
                || parse_handle(&AgentHandle::new(handle.clone())).is_none_or(|(h, ..)| h != host)
        });
    }

    /// Stops, in the background, what is to be stopped on `host` now that it answers: the
    /// windows of copies given up on (TERM first: their trap pushes a last checkpoint into
    /// the host's repository, where it stays, and removes their clone), and the agents of
    /// runs cancelled while it did not answer.
    fn stop_due(self: &Arc<Self>, host: &str) {
        let (copies, runs) = {
            let mut state = self.state();
            let copies: Vec<(String, Abandoned)> = state
                .abandoned
                .iter_mut()
                .filter(|(handle, a)| {
                    !a.stopping
                        && parse_handle(&AgentHandle::new(handle.to_string()))
                            .is_some_and(|(h, ..)| h == host)
                })
                .map(|(handle, a)| {
                    a.stopping = true;
                    (handle.clone(), a.clone())
                })
                .collect();
            let runs = state.stop_later.remove(host).unwrap_or_default();
            (copies, runs)
        };
        if copies.is_empty() && runs.is_empty() {
            return;
        }
        let (me, host) = (self.clone(), host.to_string());
        std::thread::spawn(move || {
            let Ok(conn) = me.conn(&host) else { return };
            for (handle, a) in copies {
                let want = format!("{}|{}|{}", a.ac, a.run, a.node);
                let stopped = conn.run(
                    &stop_script(&me.pre(&host), &a.pane, &want),
                    None,
                    CALL_TIMEOUT,
                );
                let mut state = me.state();
                match stopped {
                    Ok(_) => {
                        tracing::info!(host = %host, run = %a.run, node = %a.node, "stopped the window of a copy given up on");
                        state.abandoned.remove(&handle);
                    }
                    Err(_) => {
                        if let Some(a) = state.abandoned.get_mut(&handle) {
                            a.stopping = false;
                        }
                    }
                }
            }
            for run in runs {
                if let Err(e) = me.stop_run_on(conn, &run) {
                    tracing::warn!(host = %host, run = %run, error = %e.message, "could not stop a cancelled run's agents on an ssh host");
                    me.state()
                        .stop_later
                        .entry(host.clone())
                        .or_default()
                        .insert(run);
                }
            }
        });
    }
}

/// Marks a copy given up on in the daemon's repository (`…/<copy>/lost`, at the checkpoint
/// the next copy resumes from), so that nothing of it is fetched or adopted again, even after
/// a restart.
pub(super) fn give_up(a: &Placed, reason: &str) {
    let git = Git::new(&a.worktree);
    let mine = a.prefix();
    let at = [
        format!("{mine}/wip"),
        format!("{mine}/head"),
        format!("{mine}/base"),
    ]
    .into_iter()
    .find(|r| has_commit(&git, r));
    if let Some(at) = at {
        let _ = git.plumbing(&["update-ref", &format!("{mine}/lost"), &at]);
    }
    tracing::warn!(run = %a.run, node = %a.node, %reason, "an agent on an ssh host is given up");
    let _ = append_log(&a.log, format!("\noctl: {reason}\n").as_bytes());
}

/// A window found on a host that this runner did not start (a daemon restarted), or whose
/// start it took for failed: a copy given up on (marked lost in the daemon's repository, which
/// the window names) is to be stopped, also once its node's worktree is gone.
pub(super) fn adopt(p: &Pane, attempt: u32, copy: u32) -> Adopted {
    let worktree = PathBuf::from(&p.worktree);
    let mark = format!("{}/{copy}/lost", ref_prefix(&p.run, &p.node, attempt));
    if !p.repo.is_empty() && Path::new(&p.repo).is_dir() && has_commit(&Git::new(&p.repo), &mark) {
        return Adopted::GivenUp;
    }
    if !worktree.is_dir() || p.remote_git.is_empty() {
        return Adopted::No;
    }
    let placed = Placed {
        run: p.run.clone(),
        node: p.node.clone(),
        attempt,
        copy,
        pane: p.pane.clone(),
        worktree,
        log: PathBuf::from(&p.log),
        remote_log: p.remote_log.clone(),
        // Its output is brought again from the start: repeated lines over lost ones.
        offset: 0,
        remote_git: p.remote_git.clone(),
        pid: p.pid,
        alive: !p.dead,
        ended_at: p.dead.then(Instant::now),
        exit_status: p.status,
        exit_signal: p.signal,
        placed: Instant::now(),
    };
    let given_up = has_commit(
        &Git::new(&placed.worktree),
        &format!("{}/lost", placed.prefix()),
    );
    if given_up {
        Adopted::GivenUp
    } else {
        Adopted::Yes(Box::new(placed))
    }
}

pub(super) fn append_log(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if bytes.is_empty() {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(bytes)
}
