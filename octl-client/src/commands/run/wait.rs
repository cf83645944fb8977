//! `run wait RUN [--timeout S]` and `run watch RUN`: following a run through
//! [`crate::follow`].

use std::time::Duration;

use clap::Args;
use octl_proto::AppError;
use serde_json::Value;

use super::{run_param, RunArg};
use crate::commands::Ctx;
use crate::follow::{report_wait, wait_exit_code, wait_run, watch_run, Mode, Progress, WatchMode};

#[derive(Debug, Args)]
pub struct RunWaitArgs {
    /// The run: its full id (a ULID) or a unique prefix of at least 6 characters
    #[arg(value_name = "RUN")]
    pub run: String,

    /// Give up after S seconds (decimals allowed) with exit 1, kind `timeout`; the run goes on
    #[arg(long, value_name = "S")]
    pub timeout: Option<f64>,
}

pub(super) async fn wait(ctx: &Ctx, args: RunWaitArgs) -> Result<i32, AppError> {
    let run = run_param(&args.run)?.run;
    let timeout = args.timeout.map(timeout_duration).transpose()?;
    let mut progress = Progress::new(Mode::detect(ctx.out.json));
    let detail = wait_run(ctx, &run, None, timeout, &mut progress).await?;
    Ok(report_wait(ctx, &detail.manifest, &detail))
}

pub(super) async fn watch(ctx: &Ctx, arg: RunArg) -> Result<i32, AppError> {
    let run = run_param(&arg.run)?.run;
    let detail = watch_run(ctx, &run, WatchMode::detect(ctx.out.json)).await?;
    if ctx.out.json {
        // The stream was the output; the exit code says how the run ended.
        return Ok(wait_exit_code(&detail));
    }
    Ok(report_wait(ctx, &Value::Null, &detail))
}

/// `--timeout S`: a number of seconds, ≥ 0.
pub fn timeout_duration(seconds: f64) -> Result<Duration, AppError> {
    if !seconds.is_finite() || !(0.0..=1e9).contains(&seconds) {
        return Err(AppError::invalid(format!(
            "invalid --timeout {seconds}: give a number of seconds from 0 to 1000000000, e.g. 300 or 2.5"
        )));
    }
    Ok(Duration::from_secs_f64(seconds))
}
