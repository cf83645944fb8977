//! The shell scripts the SSH runner sends to a host (the look, a stop) and the parsing of
//! the look's answer.

use super::*;

pub(super) fn parse_look(out: &[u8]) -> Option<Look> {
    let mut look = Look::default();
    let mut rest = out;
    let line = |rest: &mut &[u8]| -> Option<String> {
        let end = rest.iter().position(|b| *b == b'\n')?;
        let l = String::from_utf8_lossy(&rest[..end]).into_owned();
        *rest = &rest[end + 1..];
        Some(l)
    };
    look.root = line(&mut rest).unwrap_or_default();
    let mut ended = false;
    while let Some(l) = line(&mut rest) {
        if l == format!("{SEP}END") {
            ended = true;
            break;
        }
        let f: Vec<&str> = l.split(SEP).collect();
        if f.len() < 13 {
            continue;
        }
        // Windows made before the daemon's repository was recorded with them have 13 fields.
        let repo = f.get(13).copied().unwrap_or_default().to_string();
        look.panes.push(Pane {
            server_pid: f[0].parse().ok(),
            pane: f[1].to_string(),
            pid: f[2].parse().ok(),
            dead: f[3] == "1",
            status: f[4].parse().ok(),
            signal: f[5].parse().ok(),
            run: f[6].to_string(),
            node: f[7].to_string(),
            ac: f[8].to_string(),
            worktree: f[9].to_string(),
            log: f[10].to_string(),
            remote_log: f[11].to_string(),
            remote_git: f[12].to_string(),
            repo,
        });
    }
    while let Some(l) = line(&mut rest) {
        let f: Vec<&str> = l.split(SEP).collect();
        let (Some("L"), Some(pane), Some(n)) = (f.first().copied(), f.get(1), f.get(2)) else {
            break;
        };
        let n = n.parse::<usize>().unwrap_or(0).min(rest.len());
        look.logs.insert(pane.to_string(), rest[..n].to_vec());
        rest = &rest[n..];
    }
    // A list cut short is no list: taking it would drop every agent after the cut.
    ended.then_some(look)
}

/// The start of every script: `R`, this daemon's directory on the host, and `S`, its tmux
/// server's socket.
pub(super) fn preamble(tag: &str, host: &str) -> String {
    format!(
        "R=\"$HOME/.octl-remote/{tag}/{}\"; S=\"$R/tmux.sock\"; t() {{ tmux -S \"$S\" -f /dev/null \"$@\"; }}\n",
        dir_name(host)
    )
}

/// The look script: the panes (the tmux server made to reap exited agents first, as the
/// local runner does), then the agents' new output.
pub(super) fn look_script(pre: &str, ask: &Ask) -> String {
    let fields = [
        "#{pid}",
        "#{pane_id}",
        "#{pane_pid}",
        "#{pane_dead}",
        "#{pane_dead_status}",
        "#{pane_dead_signal}",
        "#{session_name}",
        "#{window_name}",
        "#{@octl_ac}",
        "#{@octl_wt}",
        "#{@octl_log}",
        "#{@octl_rlog}",
        "#{@octl_git}",
        "#{@octl_repo}",
    ]
    .join(SEP);
    let mut s = format!(
        "{pre}printf '%s\\n' \"$R\"\nF={}\nL=$(t list-panes -a -F \"$F\" 2>/dev/null)\n\
         if printf '%s\\n' \"$L\" | awk -F'[|]~[|]' '$4==\"1\" && $5==\"\" && $6==\"\" {{f=1}} END {{exit !f}}'; then\n\
           kill -CHLD \"$(printf '%s\\n' \"$L\" | awk -F'[|]~[|]' 'NR==1 {{print $1}}')\" 2>/dev/null; sleep 0.05; L=$(t list-panes -a -F \"$F\" 2>/dev/null)\nfi\n\
         [ -z \"$L\" ] || printf '%s\\n' \"$L\"\nprintf '%s\\n' '{SEP}END'\n\
         lg() {{ [ -f \"$2\" ] || return 0; s=$(wc -c < \"$2\"); n=$((s - $3)); [ \"$n\" -gt {LOG_CHUNK} ] && n={LOG_CHUNK}; \
         [ \"$n\" -gt 0 ] || return 0; printf 'L{SEP}%s{SEP}%s\\n' \"$1\" \"$n\"; tail -c +$(($3 + 1)) \"$2\" | head -c \"$n\"; }}\n",
        q(&fields)
    );
    for (pane, log, offset) in &ask.logs {
        s.push_str(&format!("lg {} {} {offset}\n", q(pane), q(log)));
    }
    s.push_str("exit 0\n");
    s
}

/// A host's setup, made once (see `Inner::set_up`): the daemon's directory, the tools, the job
/// script from stdin, the tmux server kept up when empty, the bare repository `repo_id`.
/// Prints the directory.
pub(super) fn setup_script(pre: &str, repo_id: &str) -> String {
    format!(
        "set -e\n{pre}mkdir -p \"$R/logs\" \"$R/work\"\n\
         command -v tmux >/dev/null 2>&1 || {{ echo 'tmux is not installed on this host' >&2; exit 3; }}\n\
         command -v git >/dev/null 2>&1 || {{ echo 'git is not installed on this host' >&2; exit 3; }}\n\
         cat > \"$R/shim.sh.$$\" && mv \"$R/shim.sh.$$\" \"$R/shim.sh\"\n\
         t start-server \\; set-option -s exit-empty off\n\
         [ -d \"$R/{repo_id}.git\" ] || git init -q --bare \"$R/{repo_id}.git\"\nprintf '%s\\n' \"$R\"\n"
    )
}

/// One more repository on a host set up already: its bare repository. Prints the directory.
pub(super) fn repo_script(pre: &str, repo_id: &str) -> String {
    format!(
        "set -e\n{pre}t start-server \\; set-option -s exit-empty off\n\
         [ -d \"$R/{repo_id}.git\" ] || git init -q --bare \"$R/{repo_id}.git\"\nprintf '%s\\n' \"$R\"\n"
    )
}

/// Opens a node's window running `cmd` (which waits for the signal `go`), sets the options a
/// restarted daemon adopts it by and the pipe of its output into `rlog`, then lets it go.
/// Prints the pane's id and pid.
#[allow(clippy::too_many_arguments)]
pub(super) fn window_script(
    pre: &str,
    cmd: &str,
    run: &str,
    node: &str,
    ac: &str,
    wt: &str,
    log: &str,
    rlog: &str,
    git: &str,
    repo: &str,
    go: &str,
    before: &str,
) -> String {
    format!(
        "{pre}{before}CMD={cmd}\n\
         P=$(t new-window -d -P -F '#{{pane_id}}' -t ={run}: -n {node} -c \"$R\" /bin/sh -c \"$CMD\" 2>/dev/null) ||\n\
         P=$(t new-session -d -P -F '#{{pane_id}}' -s {run} -n {node} -x 200 -y 50 -c \"$R\" /bin/sh -c \"$CMD\" 2>/dev/null) ||\n\
         P=$(t new-window -d -P -F '#{{pane_id}}' -t ={run}: -n {node} -c \"$R\" /bin/sh -c \"$CMD\") || exit 1\n\
         t set-option -w -t \"$P\" remain-on-exit on \\; set-option -w -t \"$P\" @octl_ac {ac} \\; \
         set-option -w -t \"$P\" @octl_wt {wt} \\; set-option -w -t \"$P\" @octl_log {log} \\; \
         set-option -w -t \"$P\" @octl_rlog {rlog} \\; set-option -w -t \"$P\" @octl_git {git} \\; \
         set-option -w -t \"$P\" @octl_repo {repo} \\; \
         pipe-pane -t \"$P\" -o {pipe} \\; wait-for -S {go}\n\
         t display -p -t \"$P\" '#{{pane_id}} #{{pane_pid}}'\n",
        cmd = q(cmd),
        wt = q(wt),
        log = q(log),
        rlog = q(rlog),
        git = q(git),
        repo = q(repo),
        pipe = q(&format!("exec cat >> {}", q(rlog))),
        go = q(go),
    )
}

/// Points `refs` (name, commit) in the host's bare repository `git` at their commits, if it
/// has them all; else prints `NEEDPUSH` and stops the script (the daemon pushes, then runs it
/// again). A start from a base the host has already (every unit of a fan-out) needs no push.
pub(super) fn base_refs_script(git: &str, refs: &[(String, String)]) -> String {
    let mut s = String::new();
    for (_, commit) in refs {
        s.push_str(&format!(
            "git -C {g} cat-file -e {c} 2>/dev/null || {{ echo NEEDPUSH; exit 0; }}\n",
            g = q(git),
            c = q(&format!("{commit}^{{commit}}"))
        ));
    }
    for (name, commit) in refs {
        s.push_str(&format!(
            "git -C {} update-ref {} {} || exit 1\n",
            q(git),
            q(name),
            q(commit)
        ));
    }
    s
}

/// Stops every agent of `run` (TERM, up to 10 s for their traps' checkpoints), then closes
/// its session. Prints how many windows it had.
pub(super) fn stop_run_script(pre: &str, run: &str) -> String {
    format!(
        "{pre}n=0; pids=\n\
         for P in $(t list-panes -s -t ={run} -F '#{{pane_id}}' 2>/dev/null); do\n\
           [ \"$(t display -p -t \"$P\" '#{{pane_dead}}')\" = 1 ] || pids=\"$pids $(t display -p -t \"$P\" '#{{pane_pid}}')\"\n\
           n=$((n + 1))\ndone\n\
         [ -z \"$pids\" ] || kill -TERM $pids 2>/dev/null\n\
         i=0; while [ $i -lt 100 ]; do a=; for p in $pids; do kill -0 $p 2>/dev/null && a=1; done\n\
           [ -z \"$a\" ] && break; sleep 0.1; i=$((i + 1)); done\n\
         [ $n -eq 0 ] || t kill-session -t ={run}\necho $n\n"
    )
}

/// Stops one agent the way a cancelled Slurm job is: TERM to the job script (its trap pushes
/// a last checkpoint), up to 10 s for it to end, then its window closed. Prints `yes live`
/// (it was TERMed) or `yes dead` (it had ended) if the pane was still `want`
/// (`<attempt>.<copy>|<run>|<node>`), else `no`.
pub(super) fn stop_script(pre: &str, pane: &str, want: &str) -> String {
    format!(
        "{pre}P={p}\n[ \"$(t display -p -t \"$P\" '#{{@octl_ac}}|#{{session_name}}|#{{window_name}}' 2>/dev/null)\" = {w} ] || {{ echo no; exit 0; }}\n\
         L=dead; if [ \"$(t display -p -t \"$P\" '#{{pane_dead}}')\" != 1 ]; then L=live\n\
           pid=$(t display -p -t \"$P\" '#{{pane_pid}}'); kill -TERM \"$pid\" 2>/dev/null; i=0\n\
           while kill -0 \"$pid\" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done\nfi\n\
         t kill-window -t \"$P\"; echo \"yes $L\"\n",
        p = q(pane),
        w = q(want)
    )
}
