//! What the Slurm runner asks of the cluster itself, apart from its jobs: whether `sinfo`
//! answers and knows the partition (`doctor`, a spawn's check), and how many jobs the
//! partition can run now (`max_parallel = "cluster"`).

use super::slurm;
use super::Result;
use crate::config::SlurmConfig;
use octl_proto::{AppError, ErrorKind};

/// `sinfo` answers, and knows `partition` (or has a default one). Ok: its nodes by state.
pub fn check_cluster(partition: Option<&str>) -> Result<String> {
    // One line per partition: name (the default one ends in '*'), availability, and nodes
    // allocated/idle/other/total.
    let text = slurm("sinfo", &["-h", "-s", "-o", "%P|%a|%F"])?;
    let parts: Vec<(&str, &str, &str)> = text
        .lines()
        .filter_map(|l| {
            let mut f = l.trim().split('|');
            Some((f.next()?, f.next()?, f.next()?))
        })
        .collect();
    let found = parts.iter().find(|(name, _, _)| match partition {
        Some(p) => name.trim_end_matches('*') == p,
        None => name.ends_with('*'),
    });
    let Some((name, avail, nodes)) = found else {
        let known: Vec<&str> = parts.iter().map(|p| p.0).collect();
        return Err(AppError::new(
            ErrorKind::ToolFailed,
            match partition {
                Some(p) => format!(
                    "sinfo knows no partition {p:?} (it has: {})",
                    known.join(", ")
                ),
                None => format!(
                    "the cluster has no default partition (it has: {}); set partition",
                    known.join(", ")
                ),
            },
        ));
    };
    let name = name.trim_end_matches('*');
    if *avail != "up" {
        return Err(AppError::new(
            ErrorKind::ToolFailed,
            format!("partition {name} is {avail}"),
        ));
    }
    Ok(format!(
        "sinfo answers: partition {name} up, nodes allocated/idle/other/total {nodes}"
    ))
}

/// The `cluster` cap of a fan-out on the Slurm runner `config`: the jobs its partition can run
/// now — its idle CPUs (`sinfo %C`: allocated/idle/other/total) over the CPUs each job asks
/// (`--cpus-per-task`/`-c` in `sbatch_args`, else 1), at least 1 and at most 256. Ok: the
/// cap and what it came from (recorded in the run).
pub fn cluster_cap(
    config: &SlurmConfig,
) -> Result<(usize, serde_json::Map<String, serde_json::Value>)> {
    let mut args = vec!["-h", "-o", "%C|%P"];
    if let Some(p) = &config.partition {
        args.extend(["-p", p.as_str()]);
    }
    let text = slurm("sinfo", &args)?;
    // One line per partition (and node state); the default partition's name ends in '*'.
    let mut idle = 0usize;
    let mut partition = None;
    for line in text.lines() {
        let Some((cpus, part)) = line.trim().split_once('|') else {
            continue;
        };
        if config.partition.is_none() && !part.ends_with('*') {
            continue;
        }
        partition = Some(part.trim_end_matches('*').to_string());
        idle += cpus
            .split('/')
            .nth(1)
            .and_then(|i| i.parse::<usize>().ok())
            .unwrap_or(0);
    }
    let Some(partition) = partition else {
        return Err(AppError::new(
            ErrorKind::ToolFailed,
            "sinfo lists no partition for this runner: cannot read the cluster's cap",
        ));
    };
    let per_job = cpus_per_task(&config.sbatch_args);
    let cap = (idle / per_job).clamp(1, octl_proto::plan::MAX_PARALLEL);
    let how = serde_json::json!({
        "partition": partition,
        "idle_cpus": idle,
        "cpus_per_job": per_job,
        "formula": "idle CPUs of the partition now / CPUs per job, 1 to 256",
    });
    Ok((cap, how.as_object().cloned().unwrap_or_default()))
}

/// The CPUs one job asks for in `sbatch_args` (`--cpus-per-task=N`, `-c N`, `-cN`); 1 if none.
fn cpus_per_task(args: &[String]) -> usize {
    let mut it = args.iter();
    let mut n = None;
    while let Some(a) = it.next() {
        let v = if let Some(v) = a.strip_prefix("--cpus-per-task=") {
            Some(v.to_string())
        } else if a == "--cpus-per-task" || a == "-c" {
            it.next().cloned()
        } else {
            a.strip_prefix("-c").map(str::to_string)
        };
        if let Some(k) = v.and_then(|v| v.parse::<usize>().ok()) {
            n = Some(k);
        }
    }
    n.filter(|k| *k > 0).unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jobs_cpus_come_from_its_sbatch_args() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(cpus_per_task(&args(&[])), 1);
        assert_eq!(cpus_per_task(&args(&["--cpus-per-task=4"])), 4);
        assert_eq!(cpus_per_task(&args(&["--mem=1G", "-c", "2"])), 2);
        assert_eq!(cpus_per_task(&args(&["-c3"])), 3);
        assert_eq!(cpus_per_task(&args(&["-c", "0"])), 1);
    }
}
