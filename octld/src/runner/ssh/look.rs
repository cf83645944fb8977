//! Taking a look's answer in: which agents a host still has, which it lost, and their output.

use super::*;
/// Takes in one look at `host` (or its failure).
pub(super) fn take(state: &Mutex<State>, host: &str, look: Result<Look>, began: Instant) {
    let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
    let State { hosts, lost } = &mut *state;

    let h = hosts.entry(host.to_string()).or_default();
    let look = match look {
        Ok(l) => l,
        Err(e) => {
            tracing::debug!(host, error = %e.message, "an ssh host did not answer a look");
            h.failed += 1;
            let since = *h.failing_since.get_or_insert_with(Instant::now);
            h.error = e.message.clone();
            if h.failed >= LOST_AFTER && !h.agents.is_empty() {
                let reason = format!(
                    "ssh host {host} stopped answering: {} looks in a row failed over {:.0} s (last: {})",
                    h.failed,
                    since.elapsed().as_secs_f64(),
                    e.message
                );
                for (handle, a) in std::mem::take(&mut h.agents) {
                    give_up(&a, &reason);
                    lost.insert(
                        handle.clone(),
                        Lost {
                            run: a.run,
                            node: a.node,
                            handle: AgentHandle::new(handle),
                            reason: reason.clone(),
                        },
                    );
                }
            }
            return;
        }
    };
    tracing::debug!(host, panes = look.panes.len(), known = h.agents.len(), root = %look.root, "looked at an ssh host");
    h.failed = 0;
    h.failing_since = None;
    h.answered = true;
    h.root = Some(look.root.clone());
    let mut seen = BTreeMap::new();
    for p in &look.panes {
        let Some((attempt, copy)) = p.attempt_copy() else {
            continue;
        };
        let handle = handle_of(host, attempt, copy, &p.pane).into_string();
        if lost.contains_key(&handle) {
            continue;
        }
        let entry = match h.agents.remove(&handle) {
            Some(a) => Some(a),
            // A window made before this daemon started: adopted, unless its copy was
            // given up on (the mark in the daemon's repository says so).
            None => adopt(p, attempt, copy),
        };
        let Some(mut a) = entry else {
            continue;
        };
        a.pid = p.pid.or(a.pid);
        a.alive = !p.dead;
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
}

/// One look at a host.
pub(super) fn look(conn: &Conn, pre: &str, ask: &Ask) -> Result<Look> {
    let out = conn.run(&look_script(pre, ask), None, LOOK_TIMEOUT)?;
    parse_look(&out).ok_or_else(|| {
        AppError::new(
            ErrorKind::ToolFailed,
            format!("on {}: the look's answer was cut short", conn.host),
        )
    })
}

/// Marks a copy given up on in the daemon's repository (`…/<copy>/lost`, at the checkpoint
/// the next copy resumes from), so that nothing of it is fetched again, even after a restart.
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
    tracing::warn!(run = %a.run, node = %a.node, %reason, "an agent's host is lost");
    let _ = append_log(&a.log, format!("\noctl: {reason}\n").as_bytes());
}

/// An agent's window found on a host that this runner did not start (a daemon restarted).
pub(super) fn adopt(p: &Pane, attempt: u32, copy: u32) -> Option<Placed> {
    let worktree = PathBuf::from(&p.worktree);
    if !worktree.is_dir() || p.remote_git.is_empty() {
        return None;
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
        exit_status: p.status,
        exit_signal: p.signal,
        placed: Instant::now(),
    };
    let given_up = has_commit(
        &Git::new(&placed.worktree),
        &format!("{}/lost", placed.prefix()),
    );
    (!given_up).then_some(placed)
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
