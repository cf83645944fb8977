//! Creating a run: [`Store::create_run`] and [`Store::begin_run`], which write a new run's
//! directory, input files and first events in one synced write, and [`Syncing`], that write
//! on its way to disk. Apart from the rest of [`Store`] because creation is the one path that
//! writes a log before the run's writer exists.

use std::fs;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::watch;

use octl_proto::event::RunCreated;
use octl_proto::{AppError, ErrorKind, Event, RunState};

use super::handle::{untrusted_hint, RunHandle};
use super::index::Open;
use super::log::{self, LogWriter, Unsynced, LOG_FILE};
use super::{fault, projections, writer, Draft, Store};

/// What a new run starts with; see [`Store::create_run`].
pub struct NewRun {
    /// From [`ids::new_ulid`]; known before creation so that settings and first events can
    /// name things after it (branches, worktrees).
    pub id: String,
    /// Its first event: kind, title, repository, base and settings.
    pub created: RunCreated,
    pub initial: Vec<Draft>,
    /// Input files kept in the run directory, by name.
    pub files: Vec<(String, Vec<u8>)>,
}

/// How a new run's first write ended: `Ok(projected)` once the log and directories are
/// synced (`projected`: its projections were written too; if not, the writer heals them),
/// the sync's error otherwise; `None` while it is under way.
pub type FirstWrite = watch::Receiver<Option<Result<bool, String>>>;

/// A new run's first write on its way to disk (see [`Store::begin_run`]).
pub struct Syncing {
    handle: Arc<RunHandle>,
    /// The last seq of the first write.
    seq: u64,
    first: FirstWrite,
    /// The events of the first write, for the feed.
    events: Arc<Vec<Event>>,
}

impl Syncing {
    /// Returns once the run's directory and first events are on disk.
    pub async fn wait(mut self) -> Result<(), AppError> {
        let run = self.handle.id.clone();
        let ended = self
            .first
            .wait_for(Option::is_some)
            .await
            .map(|v| v.clone())
            .map_err(|_| AppError::internal(format!("the first write of run {run} was lost")))?;
        match ended {
            Some(Err(e)) => {
                self.handle
                    .set_untrusted(format!("its first write failed to sync: {e}"));
                Err(AppError::new(
                    ErrorKind::IoError,
                    format!("cannot sync new run {run}: {e}"),
                )
                .with_hint(untrusted_hint()))
            }
            _ => {
                // Readers of committed events (streams, `event.list`) see them from now on.
                self.handle.committed.fetch_max(self.seq, Ordering::AcqRel);
                self.handle.feed(&self.events);
                Ok(())
            }
        }
    }
}

impl Store {
    /// Creates a run: its directory, any input files it keeps (a manifest, a plan), and its
    /// log holding `run.created` and the `initial` events, synced with the directory entry
    /// before this returns. One sync for all of it. If that sync fails, the run is taken
    /// away again: nothing was announced from it, so a refused creation leaves nothing.
    pub async fn create_run(&self, new: NewRun) -> Result<Arc<RunHandle>, AppError> {
        let (handle, syncing) = self.begin_run(new).await?;
        if let Err(e) = syncing.wait().await {
            self.shared.maps_mut().active.remove(&handle.id);
            handle.tx.lock().expect("tx lock").take();
            let dir = handle.dir.clone();
            let shared = self.shared.clone();
            let id = handle.id.clone();
            let _ = tokio::task::spawn_blocking(move || {
                let _ = fs::remove_dir_all(dir);
                shared.index.forget(&id)
            })
            .await;
            return Err(e.with_hint(
                "nothing was recorded: the run was not created; check the disk (dmesg) and retry",
            ));
        }
        Ok(handle)
    }

    /// [`Store::create_run`], returning as soon as the run's first events are written (in
    /// the page cache, so a daemon crash keeps them) while its projections are written and
    /// everything is synced in the background. A caller can overlap side effects the events
    /// announce with that, and must [`Syncing::wait`] before acknowledging anything; the
    /// run's writer commits nothing before it is done either.
    pub async fn begin_run(&self, new: NewRun) -> Result<(Arc<RunHandle>, Syncing), AppError> {
        let NewRun {
            id,
            created,
            initial,
            files,
        } = new;
        let kind = created.kind;
        if self.shared.closing.load(Ordering::Acquire) {
            return Err(AppError::new(
                ErrorKind::ShuttingDown,
                "the daemon is shutting down",
            ));
        }
        let dir = self.shared.home.run_dir(&id);
        let draft = Draft::daemon(None, created);
        let seed = RunState {
            id: id.clone(),
            kind,
            title: None,
            repo: None,
            base: None,
            settings: Default::default(),
            created_at: String::new(),
            updated_at: String::new(),
            last_seq: 0,
            ended: None,
            merge: None,
            merge_commit: None,
            nodes: Default::default(),
            node_order: Vec::new(),
            discussions: Default::default(),
            spinoffs: Default::default(),
            idempotency: Default::default(),
            budget_spent: false,
            permissions: Default::default(),
            allowed: Vec::new(),
            judged: None,
            judge_failed: None,
        };
        let ev = writer::new_event(&seed, draft);
        let mut state = RunState::from_created(&ev)?;
        let mut line = format!("{}\n", ev.to_line());
        let mut events = vec![ev];
        for draft in initial {
            let ev = writer::new_event(&state, draft);
            state.apply(&ev)?;
            line.push_str(&ev.to_line());
            line.push('\n');
            events.push(ev);
        }
        let events = Arc::new(events);
        let runs_dir = self.shared.home.runs();
        let created = state.clone();
        let dir2 = dir.clone();
        let shared = self.shared.clone();
        let run = id.clone();
        let open = Open {
            fed: 0,
            at: self.shared.feed_head(),
        };
        let log = tokio::task::spawn_blocking(move || -> io::Result<Unsynced> {
            // The index names the run before it exists: a crash from here on leaves at most a
            // directory without a log, which the next start forgets (and says so).
            shared.index.open_run(&run, open)?;
            // A crash here: the index names a run that was never made.
            crate::failpoint::crash("create:after-index");
            // Subdirectories (`nodes/`, `logs/`, …) appear with their first file: a directory
            // costs as much as a synced write on some disks, and most runs never need some.
            match fs::create_dir(&dir2) {
                // A directory without a log is a creation a crash cut short (the store ignores
                // it): the run whose id was recorded before it existed is made in it now.
                Err(e)
                    if e.kind() == io::ErrorKind::AlreadyExists
                        && !dir2.join(LOG_FILE).exists() => {}
                other => other?,
            }
            let written = (|| {
                for (name, bytes) in &files {
                    fs::write(dir2.join(name), bytes)?;
                }
                LogWriter::create(&dir2.join(LOG_FILE), line.as_bytes())
            })();
            if written.is_err() {
                // A full disk: the run was never created, so nothing half-made stays.
                let _ = fs::remove_dir_all(&dir2);
                if let Err(e) = shared.index.forget(&run) {
                    tracing::warn!(run = %run, error = %e, "cannot record in the run index that a run was not created; the next start forgets it");
                }
            }
            written
        })
        .await
        .map_err(|e| AppError::internal(e.to_string()))?
        .map_err(|e| {
            let err = fault::storage_error(&format!("cannot create run {id}"), &dir, &e);
            let hint = err.hint.clone().unwrap_or_default();
            err.with_hint(format!("nothing was created; {hint}"))
        })?;
        let (done, first) = watch::channel(None);
        let dir2 = dir.clone();
        tokio::task::spawn_blocking(move || {
            // Projections that cannot be written now are healed by the writer: they are
            // derived, and the run exists once its log is synced.
            let projected = match projections::write_all(&dir2, &created) {
                Ok(_) => true,
                Err(e) => {
                    tracing::warn!(dir = %dir2.display(), error = %e, "cannot write a new run's projections; they are written again later");
                    false
                }
            };
            let result = log
                .sync()
                .and_then(|_| log::sync_dir(&dir2))
                .and_then(|_| log::sync_dir(&runs_dir));
            let _ = done.send(Some(result.map(|_| projected).map_err(|e| e.to_string())));
        });
        let handle = self.start(
            id.clone(),
            state,
            Some((first.clone(), events.clone())),
            false,
        );
        let seq = handle.view().manifest.last_seq;
        Ok((
            handle.clone(),
            Syncing {
                handle,
                seq,
                first,
                events,
            },
        ))
    }
}
