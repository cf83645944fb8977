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
/// local runner does), then the agents' new output, then closing lost copies' windows.
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
    for (pane, what) in &ask.close {
        s.push_str(&format!(
            "[ \"$(t display -p -t {p} '#{{@octl_ac}}|#{{session_name}}|#{{window_name}}' 2>/dev/null)\" = {w} ] && t kill-window -t {p}\n",
            p = q(pane),
            w = q(what)
        ));
    }
    s.push_str("exit 0\n");
    s
}

/// Stops one agent the way a cancelled Slurm job is: TERM to the job script (its trap pushes
/// a last checkpoint), up to 10 s for it to end, then its window closed. Prints `yes` if the
/// pane was still `want` (`<attempt>.<copy>|<run>|<node>`).
pub(super) fn stop_script(pre: &str, pane: &str, want: &str) -> String {
    format!(
        "{pre}P={p}\n[ \"$(t display -p -t \"$P\" '#{{@octl_ac}}|#{{session_name}}|#{{window_name}}' 2>/dev/null)\" = {w} ] || {{ echo no; exit 0; }}\n\
         if [ \"$(t display -p -t \"$P\" '#{{pane_dead}}')\" != 1 ]; then\n\
           pid=$(t display -p -t \"$P\" '#{{pane_pid}}'); kill -TERM \"$pid\" 2>/dev/null; i=0\n\
           while kill -0 \"$pid\" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done\nfi\n\
         t kill-window -t \"$P\"; echo yes\n",
        p = q(pane),
        w = q(want)
    )
}
