//! At home in the shell: `completions bash|zsh|fish` and `man`, both generated from the clap
//! definitions in [`crate::cli`]; the scripts call [`super::complete`] for the values only the
//! daemon knows.

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::{Args, CommandFactory, ValueEnum};
use octl_proto::AppError;

use super::complete::Kind;
use crate::cli::Cli;

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

/// clap_complete's script for `shell`, and a hook that completes what only the daemon knows
/// where the command line takes it: run ids (`merge RUN`, `--run RUN`), a run's node names
/// (`--node`), agent profiles (`--agent`), open discussions (`discussion answer ID`) and
/// pending proposals (`spinoff accept ID`), each from `orchestratectl __complete KIND`.
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
    let slots = slots();
    match shell {
        Shell::Bash => script + &bash_hook(&slots),
        Shell::Zsh => zsh_hook(&script),
        Shell::Fish => script + &fish_hook(&slots),
    }
}

const BIN: &str = "orchestratectl";

/// Where the daemon's values go, from the clap definitions.
#[derive(Debug, Default)]
struct Slots {
    /// Command paths whose first positional is of a kind (`["run", "show"]` → runs).
    positional: Vec<(Vec<String>, Kind)>,
    /// Long options whose value is of a kind (`run` → runs, `node` → nodes).
    options: Vec<(String, Kind)>,
    /// Every long option that takes a value (its value is not a positional word).
    valued: Vec<String>,
}

fn slots() -> Slots {
    fn walk(cmd: &clap::Command, path: &mut Vec<String>, out: &mut Slots) {
        for arg in cmd.get_arguments() {
            if let (Some(long), true) = (arg.get_long(), arg.get_action().takes_values()) {
                if !out.valued.iter().any(|o| o == long) {
                    out.valued.push(long.to_string());
                }
            }
            let kind = arg.get_value_names().and_then(|names| {
                names
                    .iter()
                    .find_map(|n| Kind::of_value(n, path.first().map(String::as_str)))
            });
            let Some(kind) = kind else { continue };
            match arg.get_long() {
                Some(long) if !out.options.iter().any(|(o, _)| o == long) => {
                    out.options.push((long.to_string(), kind))
                }
                Some(_) => {}
                None if arg.is_positional() => out.positional.push((path.clone(), kind)),
                None => {}
            }
        }
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            path.push(sub.get_name().to_string());
            walk(sub, path, out);
            path.pop();
        }
    }
    let mut out = Slots::default();
    walk(&Cli::command(), &mut Vec::new(), &mut out);
    out
}

fn bash_hook(slots: &Slots) -> String {
    let mut by_option = String::new();
    let mut by_path = String::new();
    for kind in Kind::ALL {
        let opts: Vec<String> = slots
            .options
            .iter()
            .filter(|(_, k)| *k == kind)
            .map(|(o, _)| format!("--{o}"))
            .collect();
        if !opts.is_empty() {
            let _ = write!(by_option, "{}) kind={} ;; ", opts.join("|"), kind.name());
        }
        let paths: Vec<String> = slots
            .positional
            .iter()
            .filter(|(_, k)| *k == kind)
            .map(|(p, _)| format!("\"{}\"", p.join(" ")))
            .collect();
        if !paths.is_empty() {
            let _ = write!(by_path, "{}) kind={} ;; ", paths.join("|"), kind.name());
        }
    }
    let valued: Vec<String> = slots.valued.iter().map(|o| format!("--{o}")).collect();
    format!(
        r#"
# What only the daemon knows, where a command takes it (orchestratectl __complete KIND).
_orchestratectl_with_runs() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    local i words=() skip=0
    for ((i = 1; i < COMP_CWORD; i++)); do
        if ((skip)); then skip=0; continue; fi
        case "${{COMP_WORDS[i]}}" in
            {valued}) skip=1 ;;
            -*) ;;
            *) words+=("${{COMP_WORDS[i]}}") ;;
        esac
    done
    local kind=
    case "$prev" in {by_option}esac
    if [[ -z $kind && $cur != -* ]]; then
        case "${{words[*]}}" in {by_path}esac
    fi
    if [[ -n $kind ]]; then
        COMPREPLY=($(compgen -W "$("${{COMP_WORDS[0]}}" __complete "$kind" "${{COMP_WORDS[@]:1:COMP_CWORD-1}}" 2>/dev/null)" -- "$cur"))
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
        valued = valued.join("|"),
    )
}

/// zsh: every value of a kind (clap writes `:RUN:_default`, `:NODE:_default`, … for options
/// and `':run -- …:_default'` for positionals) is completed by a function that asks the
/// daemon, with the words typed so far.
fn zsh_hook(script: &str) -> String {
    let func = "\n(( $+functions[_orchestratectl_ids] )) ||\n_orchestratectl_ids() {\n    local -a ids\n    ids=(${(f)\"$(orchestratectl __complete ${argv[-1]} ${words[@]} 2>/dev/null)\"})\n    compadd -a ids\n}\n";
    let action = |kind: Kind| format!(":_orchestratectl_ids {}'", kind.name());
    let script: String = script
        .lines()
        .map(|l| {
            let kind = if l.starts_with("':run -- ") || l.contains(":RUN:_default") {
                Some(Kind::Runs)
            } else if l.contains(":NODE:_default") {
                Some(Kind::Nodes)
            } else if l.contains(":PROFILE:_default") {
                Some(Kind::Profiles)
            } else if l.starts_with("':id -- The discussion") {
                Some(Kind::Discussions)
            } else if l.starts_with("':id -- The proposal") {
                Some(Kind::Proposals)
            } else {
                None
            };
            match kind {
                Some(k) => l.replacen(":_default'", &action(k), 1),
                None => l.to_string(),
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

fn fish_hook(slots: &Slots) -> String {
    let mut out = String::from("\n# What only the daemon knows, where a command takes it.\n");
    let ask = |kind: Kind| {
        format!(
            "({BIN} __complete {} (commandline -opc)[2..] 2>/dev/null)",
            kind.name()
        )
    };
    for (p, kind) in &slots.positional {
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
            "complete -c {BIN} -n \"{cond}\" -f -a \"{}\"",
            ask(*kind)
        );
    }
    for (o, kind) in &slots.options {
        let _ = writeln!(out, "complete -c {BIN} -l {o} -r -f -a \"{}\"", ask(*kind));
    }
    out
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
    fn slots_come_from_the_definitions() {
        let slots = slots();
        for (p, kind) in [
            (&["merge"][..], Kind::Runs),
            (&["run", "show"], Kind::Runs),
            (&["run", "wait"], Kind::Runs),
            (&["run", "logs"], Kind::Runs),
            (&["discussion", "answer"], Kind::Discussions),
            (&["spinoff", "accept"], Kind::Proposals),
            (&["spinoff", "reject"], Kind::Proposals),
        ] {
            assert!(
                slots.positional.iter().any(|(q, k)| q == p && *k == kind),
                "{p:?} in {:?}",
                slots.positional
            );
        }
        let option = |o: &str| slots.options.iter().find(|(n, _)| n == o).map(|x| x.1);
        assert_eq!(option("run"), Some(Kind::Runs));
        assert_eq!(option("node"), Some(Kind::Nodes));
        assert_eq!(option("agent"), Some(Kind::Profiles));
        for o in ["home", "run", "node", "reason", "timeout"] {
            assert!(
                slots.valued.iter().any(|v| v == o),
                "{o}: {:?}",
                slots.valued
            );
        }
        assert!(!slots.valued.iter().any(|v| v == "json" || v == "follow"));
    }

    #[test]
    fn each_script_completes_every_kind() {
        let bash = completion_script(Shell::Bash);
        for kind in Kind::ALL {
            assert!(bash.contains(&format!("kind={}", kind.name())), "{kind:?}");
        }
        let zsh = completion_script(Shell::Zsh);
        for kind in Kind::ALL {
            assert!(
                zsh.contains(&format!(":_orchestratectl_ids {}'", kind.name())),
                "clap's zsh shape changed for {kind:?}"
            );
        }
        assert!(!zsh.contains(":RUN:_default") && !zsh.contains(":NODE:_default"));
        let fish = completion_script(Shell::Fish);
        assert!(fish.contains("using_subcommand run; and __fish_seen_subcommand_from show"));
        assert!(fish.contains("-l node -r -f -a \"(orchestratectl __complete nodes"));
        assert!(fish.contains("__complete proposals"));
    }
}
