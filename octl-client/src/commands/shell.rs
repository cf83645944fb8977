//! At home in the shell: `completions bash|zsh|fish` and `man`, both generated from the clap
//! definitions in [`crate::cli`], and `__complete-runs` (not a command: [`crate::main`] answers
//! it before parsing), which the completion scripts call for run ids from the daemon.

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::{Args, CommandFactory, ValueEnum};
use octl_proto::method::RunList;
use octl_proto::rpc::RunListParams;
use octl_proto::AppError;

use crate::cli::Cli;
use crate::client::Client;

pub const COMPLETIONS_EXAMPLES: &str = "\
Examples:
  orchestratectl completions bash > ~/.local/share/bash-completion/completions/orchestratectl
  orchestratectl completions zsh > ~/.zfunc/_orchestratectl     # with fpath+=(~/.zfunc)
  orchestratectl completions fish > ~/.config/fish/completions/orchestratectl.fish
  source <(orchestratectl completions bash)                     # this shell only";

pub const MAN_EXAMPLES: &str = "\
Examples:
  orchestratectl man | man -l -                 # read orchestratectl(1) now
  orchestratectl man --dir ~/.local/share/man/man1
  man orchestratectl-run-show                   # once installed in a man path";

/// The shells a completion script is generated for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to print the script for: bash, zsh or fish
    #[arg(value_enum)]
    pub shell: Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write one page per command (orchestratectl.1, orchestratectl-run-show.1, …) into DIR
    /// instead of printing orchestratectl(1) on stdout
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

pub fn completions(args: &CompletionsArgs) -> Result<(), AppError> {
    print!("{}", completion_script(args.shell));
    Ok(())
}

/// clap_complete's script for `shell`, and a hook that completes run ids where the command
/// line takes one (`merge RUN`, `run show RUN`, `--run RUN`).
pub fn completion_script(shell: Shell) -> String {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    let generator = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    clap_complete::generate(generator, &mut cmd, BIN, &mut out);
    let script = String::from_utf8(out).expect("clap_complete writes UTF-8");
    let (paths, options) = run_slots();
    match shell {
        Shell::Bash => script + &bash_hook(&paths, &options),
        Shell::Zsh => zsh_hook(&script),
        Shell::Fish => script + &fish_hook(&paths, &options),
    }
}

const BIN: &str = "orchestratectl";

/// Where a run id goes: the command paths whose first positional is a RUN (`["run",
/// "show"]`), and the long options that take one (`run`).
fn run_slots() -> (Vec<Vec<String>>, Vec<String>) {
    fn walk(
        cmd: &clap::Command,
        path: &mut Vec<String>,
        out: &mut (Vec<Vec<String>>, Vec<String>),
    ) {
        for arg in cmd.get_arguments() {
            let is_run = arg
                .get_value_names()
                .is_some_and(|names| names.iter().any(|n| n == "RUN"));
            if !is_run {
                continue;
            }
            match arg.get_long() {
                Some(long) if !out.1.iter().any(|o| o == long) => out.1.push(long.to_string()),
                Some(_) => {}
                None if arg.is_positional() => out.0.push(path.clone()),
                None => {}
            }
        }
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            path.push(sub.get_name().to_string());
            walk(sub, path, out);
            path.pop();
        }
    }
    let mut out = (Vec::new(), Vec::new());
    walk(&Cli::command(), &mut Vec::new(), &mut out);
    out
}

fn bash_hook(paths: &[Vec<String>], options: &[String]) -> String {
    let mut cases = String::new();
    for p in paths {
        let _ = write!(cases, "\"{}\"|", p.join(" "));
    }
    cases.pop();
    let opts: Vec<String> = options.iter().map(|o| format!("--{o}")).collect();
    format!(
        r#"
# Run ids from the daemon where a command takes one (orchestratectl __complete-runs).
_orchestratectl_with_runs() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    local i words=() skip=0
    for ((i = 1; i < COMP_CWORD; i++)); do
        if ((skip)); then skip=0; continue; fi
        case "${{COMP_WORDS[i]}}" in
            --home|{opts}) skip=1 ;;
            -*) ;;
            *) words+=("${{COMP_WORDS[i]}}") ;;
        esac
    done
    local runs=0
    case "$prev" in {opts}) runs=1 ;; esac
    if [[ $runs == 0 && $cur != -* ]]; then
        case "${{words[*]}}" in {cases}) runs=1 ;; esac
    fi
    if ((runs)); then
        COMPREPLY=($(compgen -W "$("${{COMP_WORDS[0]}}" __complete-runs 2>/dev/null)" -- "$cur"))
        return 0
    fi
    _orchestratectl "$@"
}}
if [[ "${{BASH_VERSINFO[0]}}" -eq 4 && "${{BASH_VERSINFO[1]}}" -ge 4 || "${{BASH_VERSINFO[0]}}" -gt 4 ]]; then
    complete -F _orchestratectl_with_runs -o nosort -o bashdefault -o default orchestratectl
else
    complete -F _orchestratectl_with_runs -o bashdefault -o default orchestratectl
fi
"#,
        opts = opts.join("|"),
    )
}

/// zsh: every RUN value (clap writes `:RUN:_default`) is completed by a function that asks
/// the daemon.
fn zsh_hook(script: &str) -> String {
    let func = "\n(( $+functions[_orchestratectl_runs] )) ||\n_orchestratectl_runs() {\n    local -a runs\n    runs=(${(f)\"$(orchestratectl __complete-runs 2>/dev/null)\"})\n    compadd -a runs\n}\n";
    let script: String = script
        .lines()
        .map(|l| {
            if l.starts_with("':run -- ") || l.contains(":RUN:_default") {
                l.replacen(":_default'", ":_orchestratectl_runs'", 1)
            } else {
                l.to_string()
            }
        })
        .map(|l| l + "\n")
        .collect();
    // Defined before the generated function is first called (at the end of the script).
    match script.rfind("\nif [ \"$funcstack[1]\" = \"_orchestratectl\" ]") {
        Some(at) => format!("{}{func}{}", &script[..at], &script[at..]),
        None => script + func,
    }
}

fn fish_hook(paths: &[Vec<String>], options: &[String]) -> String {
    let mut out = String::from("\n# Run ids from the daemon where a command takes one.\n");
    for p in paths {
        let cond = match p.as_slice() {
            [group] => format!("__fish_{BIN}_using_subcommand {group}"),
            [group, rest @ ..] => format!(
                "__fish_{BIN}_using_subcommand {group}; and __fish_seen_subcommand_from {}",
                rest.join(" ")
            ),
            [] => continue,
        };
        let _ = writeln!(
            out,
            "complete -c {BIN} -n \"{cond}\" -f -a \"({BIN} __complete-runs 2>/dev/null)\""
        );
    }
    for o in options {
        let _ = writeln!(
            out,
            "complete -c {BIN} -l {o} -r -f -a \"({BIN} __complete-runs 2>/dev/null)\""
        );
    }
    out
}

/// The argument the completion scripts call the CLI with for run ids.
pub const COMPLETE_RUNS: &str = "__complete-runs";

/// `orchestratectl __complete-runs`: every run id, newest first, one a line, from the daemon
/// of `$OCTL_HOME` (or the default home); nothing when it is down, for it is never started
/// for a completion. Always exits 0.
pub fn complete_runs() -> i32 {
    let Ok(home) = crate::home::Home::from_env(None) else {
        return 0;
    };
    let client = Client::new(home, false);
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return 0;
    };
    let listed = rt.block_on(client.call_method::<RunList>(&RunListParams::default()));
    if let Ok(runs) = listed.and_then(|l| l.parse()) {
        for run in runs.iter().rev() {
            println!("{}", run.id);
        }
    }
    0
}

pub fn man(args: &ManArgs) -> Result<(), AppError> {
    let cmd = Cli::command();
    match &args.dir {
        None => {
            let mut out = Vec::new();
            render(&cmd, &mut out)?;
            use std::io::Write as _;
            std::io::stdout()
                .write_all(&out)
                .map_err(|e| AppError::internal(format!("cannot write the page: {e}")))
        }
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| AppError::invalid(format!("invalid --dir {}: {e}", dir.display())))?;
            let mut pages = Vec::new();
            write_pages(&cmd, BIN, dir, &mut pages)?;
            println!("wrote {} pages to {}", pages.len(), dir.display());
            Ok(())
        }
    }
}

fn render(cmd: &clap::Command, out: &mut Vec<u8>) -> Result<(), AppError> {
    clap_mangen::Man::new(cmd.clone())
        .render(out)
        .map_err(|e| AppError::internal(format!("cannot render the man page: {e}")))
}

/// One page per visible command, named by its path (`orchestratectl-run-show.1`).
fn write_pages(
    cmd: &clap::Command,
    name: &str,
    dir: &std::path::Path,
    pages: &mut Vec<PathBuf>,
) -> Result<(), AppError> {
    let page = cmd
        .clone()
        .name(name.to_string())
        .bin_name(name.replace('-', " "));
    let mut out = Vec::new();
    render(&page, &mut out)?;
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, out)
        .map_err(|e| AppError::internal(format!("cannot write {}: {e}", path.display())))?;
    pages.push(path);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, &format!("{name}-{}", sub.get_name()), dir, pages)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_slots_come_from_the_definitions() {
        let (paths, options) = run_slots();
        for p in [
            &["merge"][..],
            &["run", "show"],
            &["run", "wait"],
            &["run", "logs"],
        ] {
            assert!(paths.iter().any(|q| q == p), "{p:?} in {paths:?}");
        }
        assert_eq!(options, vec!["run".to_string()]);
    }

    #[test]
    fn each_script_completes_run_ids() {
        assert!(completion_script(Shell::Bash).contains("__complete-runs"));
        let zsh = completion_script(Shell::Zsh);
        assert!(
            zsh.contains(":RUN:_orchestratectl_runs"),
            "clap's zsh shape changed"
        );
        assert!(
            zsh.contains("characters:_orchestratectl_runs'"),
            "clap's zsh shape changed"
        );
        assert!(completion_script(Shell::Fish)
            .contains("using_subcommand run; and __fish_seen_subcommand_from show"));
    }
}
