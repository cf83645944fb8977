// What the views show, derived from octld's answers by pure functions (no DOM): which runs
// need a person and why, the inbox, the routes, the plan's layout and the timeline's bars.
// The rules follow the TUI's (octl-client/src/tui/model.rs, app/inbox.rs) so both agree.

export const ID_RE = /^[A-Za-z0-9._-]{1,64}$/;
export const TABS = ['screen', 'log', 'diff', 'events'];
// docs/ARCHITECTURE.md "Node life", in life order (NodeState::ALL).
export const NODE_STATES = ['pending', 'ready', 'starting', 'queued', 'running', 'waiting', 'lost',
  'done', 'merging', 'merged', 'failed', 'exited', 'blocked', 'cancelled', 'conflict',
  'merge_blocked', 'paused'];
export const NODE_STATE_SET = new Set(NODE_STATES);
export const STATUSES = new Set(['active', 'waiting', 'completed', 'failed', 'cancelled', 'corrupt']);
export const ALIVE = new Set(['starting', 'queued', 'running', 'waiting', 'lost']);
const TERMINAL_NODE = new Set(['merged', 'failed', 'exited', 'cancelled']);
const TERMINAL_RUN = new Set(['completed', 'failed', 'cancelled']);
export const ENDED = new Set([...TERMINAL_RUN, 'corrupt']);
// Why a run needs a person, most urgent first (an undecided permission request is denied
// after [permissions] wait, so it leads).
export const ATTENTION = ['permission', 'question', 'proposal', 'input', 'conflict', 'blocked', 'to merge', 'failed'];

// ---- routes: #/runs, #/inbox, #/run/<id>[/<node>[/<tab>]] — each part an id, never markup.

export function parseRoute(hash) {
  const parts = String(hash || '').replace(/^#\/?/, '').split('/').filter(Boolean);
  const ok = (p) => typeof p === 'string' && ID_RE.test(p);
  if (parts[0] === 'inbox') return { view: 'inbox' };
  if (parts[0] === 'run' && ok(parts[1])) {
    const r = { view: 'run', run: parts[1], node: null, tab: null };
    if (ok(parts[2])) r.node = parts[2];
    if (r.node && TABS.includes(parts[3])) r.tab = parts[3];
    return r;
  }
  return { view: 'runs' };
}

export function routeHash(r) {
  if (r.view === 'inbox') return '#/inbox';
  if (r.view === 'run' && ID_RE.test(r.run || '')) {
    let h = `#/run/${r.run}`;
    if (r.node && ID_RE.test(r.node)) h += `/${r.node}` + (TABS.includes(r.tab) ? `/${r.tab}` : '');
    return h;
  }
  return '#/runs';
}

// ---- who needs a person

const nodeOf = (shown, id) => (shown.nodes || []).find((n) => n.id === id);

/** A permission request still waiting: not decided, its node's agent alive. */
export function pendingPermission(shown, p) {
  return !p.decision && ALIVE.has(nodeOf(shown, p.node)?.state);
}

/** A question a person can answer: open, and not the daemon's merge-conflict question
 * while its node can still merge (merging settles that one). */
export function answerable(shown, d) {
  if (!d.open) return false;
  if (!String(d.id).startsWith('merge-') || !d.node) return true;
  const n = nodeOf(shown, d.node);
  return !(n && !TERMINAL_NODE.has(n.state));
}

export const proposalOpen = (sp) => sp.status === 'proposed' || sp.status === 'failed';

/** Why a run (its run.show answer) needs a person, or null. */
export function attentionOfShown(shown) {
  const m = shown.manifest || {};
  const nodes = shown.nodes || [];
  const any = (f) => nodes.some(f);
  if ((shown.permissions || []).some((p) => pendingPermission(shown, p))) return 'permission';
  if ((shown.discussions || []).some((d) => answerable(shown, d))) return 'question';
  if ((shown.spinoffs || []).some(proposalOpen)) return 'proposal';
  if (ENDED.has(m.status)) return m.status === 'failed' ? 'failed' : null;
  if (any((n) => n.state === 'waiting' || (ALIVE.has(n.state)
    && ['needs_permission', 'waiting_input'].includes(n.activity?.state)))) return 'input';
  if (any((n) => n.state === 'conflict') || m.merge === 'conflict') return 'conflict';
  if (any((n) => n.state === 'merge_blocked') || m.merge === 'merge_blocked') return 'blocked';
  if (m.status === 'waiting' && ((m.kind === 'code' && any((n) => n.state === 'done'))
    || (m.kind === 'orchestrate' && nodes.length && nodes.every((n) => n.state === 'merged')))) return 'to merge';
  if (m.status === 'waiting' && any((n) => ['failed', 'exited', 'blocked'].includes(n.state))) return 'failed';
  return null;
}

/** The same judgement from a run.list summary alone (runs whose detail is not read). */
export function attentionOfSummary(r) {
  const has = (s) => (r.nodes?.[s] || 0) > 0;
  if (r.status === 'failed') return 'failed';
  if (r.status !== 'waiting') return null;
  if (has('waiting')) return 'input';
  if (has('conflict') || r.merge === 'conflict') return 'conflict';
  if (has('merge_blocked') || r.merge === 'merge_blocked') return 'blocked';
  const keys = Object.keys(r.nodes || {});
  if ((r.kind === 'code' && has('done')) || (r.kind === 'orchestrate' && has('merged') && keys.every((k) => k === 'merged'))) return 'to merge';
  if (has('failed') || has('exited') || has('blocked')) return 'failed';
  return 'question';
}

export const attentionOf = (e) => (e.shown ? attentionOfShown(e.shown) : attentionOfSummary(e.summary));

/** Runs needing a person first (most urgent reason first), then unfinished, then ended;
 * newest first within each (ULIDs sort by time). */
export function sortRuns(entries) {
  const key = (e) => [e.attention ? 0 : ENDED.has(e.summary.status) ? 2 : 1,
    e.attention ? ATTENTION.indexOf(e.attention) : 99];
  return [...entries].sort((a, b) => {
    const [ga, ra] = key(a); const [gb, rb] = key(b);
    return ga - gb || ra - rb || (a.summary.id < b.summary.id ? 1 : a.summary.id > b.summary.id ? -1 : 0);
  });
}

export function matchesFilter(e, f) {
  if (!f) return true;
  const s = e.summary;
  return [s.id, s.title, s.repo, s.status, s.kind, e.attention]
    .some((t) => t != null && String(t).toLowerCase().includes(f.toLowerCase()));
}

// ---- the inbox

/** `Bash(python3 *)`: what "allow always" allows for the rest of the run (the daemon's
 * rule_for, octl-proto/src/reducer/permissions.rs). */
export function ruleFor(tool, input) {
  const cmd = input && typeof input.command === 'string' ? input.command : null;
  if (tool === 'Bash' && cmd !== null) {
    const program = cmd.trim().split(/\s+/)[0];
    return program ? `Bash(${program} *)` : 'Bash';
  }
  return String(tool);
}

/** A permission request's input, each field as [name, text], the ones that say what runs
 * first; nothing is cut: what is allowed is all shown. */
export function inputFields(input) {
  const FIRST = ['command', 'file_path', 'path', 'url', 'pattern'];
  const rank = (k) => (FIRST.includes(k) ? FIRST.indexOf(k) : FIRST.length);
  return Object.entries(input || {})
    .sort(([a], [b]) => rank(a) - rank(b))
    .map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v, null, 2)]);
}

/** Every open item across runs (in the runs' order), most urgent kind first. Each has a
 * stable key, so a half-typed answer stays with its item when others come and go. */
export function inboxItems(entries) {
  const perms = []; const questions = []; const proposals = []; const merges = [];
  for (const e of entries) {
    const sh = e.shown;
    if (!sh) continue;
    const run = e.summary.id;
    const title = e.summary.title;
    const asked = (sh.permissions || []).filter((p) => pendingPermission(sh, p))
      .sort((a, b) => (a.asked_at < b.asked_at ? -1 : a.asked_at > b.asked_at ? 1 : a.request.length - b.request.length));
    for (const p of asked) perms.push({ kind: 'permission', key: `perm:${run}:${p.request}`, run, title, p });
    for (const d of (sh.discussions || []).filter((d) => answerable(sh, d))) {
      questions.push({ kind: 'question', key: `q:${d.id}`, run, title, d });
    }
    for (const sp of (sh.spinoffs || []).filter(proposalOpen)) {
      proposals.push({ kind: 'proposal', key: `p:${sp.id}`, run, title, sp });
    }
    const m = sh.manifest || {};
    if (TERMINAL_RUN.has(m.status)) continue;
    for (const n of sh.nodes || []) {
      const awaiting = n.state === 'done' && m.kind === 'code';
      if (n.state === 'conflict' || n.state === 'merge_blocked' || awaiting) {
        merges.push({ kind: awaiting ? 'merge' : n.state === 'conflict' ? 'conflict' : 'blocked',
          key: `m:${run}:${n.id}`, run, title, node: n });
      }
    }
    const nodes = sh.nodes || [];
    if (m.kind === 'orchestrate' && nodes.length && nodes.every((n) => n.state === 'merged') && m.status === 'waiting') {
      const kind = m.merge === 'conflict' ? 'conflict' : m.merge === 'merge_blocked' ? 'blocked' : 'merge';
      merges.push({ kind, key: `m:${run}:`, run, title, node: null, integration: m.settings?.integration });
    }
  }
  return [...perms, ...questions, ...proposals, ...merges];
}

/** What to do about a merge item, said plainly. */
export function nextStep(item) {
  if (item.kind === 'conflict') {
    return `Resolve the conflict in ${item.node?.worktree || 'its worktree'}, commit, then Merge.`;
  }
  if (item.kind === 'blocked') return "Commit or stash the base's changes to those paths, then Merge.";
  return item.node ? 'Review the diff, then Merge.' : 'Every node is merged into the integration branch: Merge it into the base.';
}

// ---- run actions: which node Merge, Retry and Cancel act on (null: the button is not shown)

const RETRYABLE = new Set(['failed', 'exited', 'conflict', 'merge_blocked']);
const MERGE_AGAIN = new Set(['conflict', 'merge_blocked']);

/** Can this node be merged now: a conflict or a blocked merge (to try again), or a code
 * run's done node (its work, reviewed). */
const mergeable = (m, n) => MERGE_AGAIN.has(n.state) || (n.state === 'done' && m.kind === 'code');

/** {node} for Merge: the selected node if it can merge, else the first that waits for a
 * merge; {node: null} for an orchestrate run whose nodes all merged (its integration branch
 * into the base); null when nothing waits for one. A corrupt run takes no action. */
export function mergeTarget(shown, selected) {
  const m = shown.manifest || {};
  const nodes = shown.nodes || [];
  if (m.status === 'corrupt') return null;
  const n = nodes.find((x) => x.id === selected && mergeable(m, x)) || nodes.find((x) => mergeable(m, x));
  if (n) return { node: n.id };
  if (m.kind === 'orchestrate' && m.status === 'waiting' && nodes.length && nodes.every((x) => x.state === 'merged')) return { node: null };
  return null;
}

/** The node Retry starts again: the selected one, if it failed, exited or could not merge
 * (the TUI's `r` in a run's view); a generic run's nodes are its client's, never retried. */
export function retryTarget(shown, selected) {
  const m = shown.manifest || {};
  if (m.status === 'corrupt' || m.kind === 'generic') return null;
  return (shown.nodes || []).find((n) => n.id === selected && RETRYABLE.has(n.state)) || null;
}

/** Cancel applies to a run that has not ended (the daemon refuses to cancel an ended one). */
export const cancellable = (shown) => !ENDED.has(shown.manifest?.status);

/** The tip a node's last review round was made on: "since last review" diffs from it. */
export function lastReviewTip(node) {
  const r = [...(node?.reviews || [])].reverse().find((x) => x.head);
  return r ? r.head : null;
}

/** The node a run opens on: the first that needs a person, else the first alive, else the first. */
export function defaultNode(shown) {
  const nodes = shown.nodes || [];
  const want = ['waiting', 'conflict', 'merge_blocked', 'failed', 'exited', 'done'];
  for (const s of want) { const n = nodes.find((x) => x.state === s); if (n) return n.id; }
  return (nodes.find((n) => ALIVE.has(n.state)) || nodes[0])?.id || null;
}

export function defaultTab(node) {
  if (!node) return 'events';
  if (ALIVE.has(node.state)) return 'screen';
  return ['pending', 'ready', 'blocked', 'cancelled', 'paused'].includes(node.state) ? 'events' : 'diff';
}

// ---- formatting

export function millis(ts) {
  const t = Date.parse(ts);
  return Number.isFinite(t) ? t : null;
}

export function fmtDuration(s) {
  if (s == null || !Number.isFinite(s) || s < 0) return '-';
  s = Math.floor(s);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${String(Math.floor(s / 60) % 60).padStart(2, '0')}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor(s / 3600) % 24}h`;
}

export const fmtCost = (x) => (typeof x === 'number' && Number.isFinite(x) ? `$${x.toFixed(2)}` : '-');

/** Nodes by state, in life order: `2 running 1 done`. */
export function countsText(nodes) {
  const out = NODE_STATES.filter((s) => nodes?.[s] > 0).map((s) => `${nodes[s]} ${s}`);
  for (const [s, n] of Object.entries(nodes || {})) if (!NODE_STATE_SET.has(s) && n > 0) out.push(`${n} ${s}`);
  return out.join(' ') || '-';
}

/** [start, end] of a run in ms: until its last change once ended, else open (null). */
export function runSpan(summary) {
  return [millis(summary.created_at), ENDED.has(summary.status) ? millis(summary.updated_at) : null];
}

export function nodeSpan(n) {
  const start = millis(n.started_at);
  if (start == null) return [null, null];
  if (n.finished_at) return [start, millis(n.finished_at)];
  return [start, ALIVE.has(n.state) ? null : millis(n.updated_at)];
}

export const basename = (p) => String(p || '').replace(/\/+$/, '').split('/').pop() || String(p || '');

// ---- the plan's graph: layers by dependency depth, each ordered to cross less

const MAX_ROWS = 12;

/** Each node's place: `col`, its layer (a layer wider than `wrap` takes several), and `row`,
 * its place in it. Drawn across, layers are columns; top to bottom, they are rows. */
export function layoutGraph(nodes, wrap = MAX_ROWS) {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const depth = new Map();
  const visit = (id, guard) => {
    if (depth.has(id)) return depth.get(id);
    const n = byId.get(id);
    // A cycle cannot be in a log the reducer accepted; the guard cuts one anyway.
    const d = n && guard < 64 ? Math.max(-1, ...(n.deps || []).filter((x) => byId.has(x)).map((x) => visit(x, guard + 1))) + 1 : 0;
    depth.set(id, d);
    return d;
  };
  nodes.forEach((n) => visit(n.id, 0));
  const cols = [];
  for (const n of nodes) (cols[depth.get(n.id)] ||= []).push(n.id);
  const row = new Map();
  cols.forEach((col, c) => {
    if (c > 0) {
      // Barycentre of each node's dependencies' rows (stable for ties: plan order).
      const bary = (id) => {
        const ds = (byId.get(id).deps || []).filter((x) => row.has(x));
        return ds.length ? ds.reduce((a, x) => a + row.get(x), 0) / ds.length : Infinity;
      };
      col.sort((a, b) => bary(a) - bary(b));
    }
    col.forEach((id, r) => row.set(id, r));
  });
  // A wide layer (a fan-out's hundred units) wraps into several of `wrap` nodes.
  const start = [];
  cols.forEach((col, c) => { start[c] = c ? start[c - 1] + Math.ceil(cols[c - 1].length / wrap) : 0; });
  const pos = new Map(nodes.map((n) => {
    const c = depth.get(n.id); const r = row.get(n.id);
    return [n.id, { col: start[c] + Math.floor(r / wrap), row: r % wrap }];
  }));
  const edges = [];
  for (const n of nodes) for (const d of n.deps || []) if (byId.has(d)) edges.push([d, n.id]);
  const sinks = nodes.filter((n) => !nodes.some((m) => (m.deps || []).includes(n.id))).map((n) => n.id);
  const last = cols.length - 1;
  return { pos, edges, sinks, cols: last < 0 ? 0 : start[last] + Math.ceil(cols[last].length / wrap),
    rows: Math.min(wrap, Math.max(0, ...cols.map((c) => c.length))) };
}

// ---- the timeline: each node's state over time, from its events

const NEXT_STATE = {
  'node.added': 'pending', 'node.ready': 'pending', 'node.unblocked': 'pending', 'node.retried': 'pending',
  'node.starting': 'starting', 'node.started': 'running', 'node.progress': 'running', 'node.running': 'running',
  'node.waiting': 'waiting', 'node.done': 'done', 'node.failed': 'failed', 'node.exited': 'exited',
  'node.paused': 'paused', 'node.blocked': 'blocked', 'node.queued': 'queued', 'node.lost': 'lost',
  'node.cancelled': 'cancelled', 'merge.started': 'merging', 'merge.succeeded': 'merged',
  'merge.conflict': 'conflict', 'merge.blocked': 'merge_blocked',
};

/** Per node: bars {state, from, to} and end marks {state, at} (merged, failed, …), from
 * the run's events; a state still held runs to `endMs`. */
export function timeline(events, nodeIds, endMs) {
  const lanes = new Map(nodeIds.map((id) => [id, { bars: [], marks: [], state: null, since: null, before: null }]));
  const asked = new Map(); // open question → the node that asked (it waits while one is open)
  for (const ev of events) {
    let node = ev.node;
    if (ev.type === 'discussion.resolved') node = asked.get(ev.data?.id);
    const lane = node != null ? lanes.get(node) : null;
    const at = millis(ev.ts);
    if (!lane || at == null) continue;
    let next = NEXT_STATE[ev.type];
    if (ev.type === 'discussion.opened') {
      asked.set(ev.data?.id, node);
      if (lane.state === 'starting' || lane.state === 'running') next = 'waiting';
    }
    if (ev.type === 'discussion.resolved') {
      asked.delete(ev.data?.id);
      if (lane.state === 'waiting' && ![...asked.values()].includes(node)) next = 'running';
    }
    // An agent may report before its start is recorded: that state stands (nodes.rs).
    if (ev.type === 'node.started' && (lane.state === 'running' || lane.state === 'waiting')) next = null;
    if (ev.type === 'node.found') next = lane.before || 'running';
    if (ev.type === 'node.review' && ev.data && !ev.data.approve) next = ev.data.way === 'typed' ? 'running' : 'pending';
    if (!next || next === lane.state) continue;
    if (ev.type === 'node.lost') lane.before = lane.state;
    if (lane.state && !TERMINAL_NODE.has(lane.state)) lane.bars.push({ state: lane.state, from: lane.since, to: at });
    if (TERMINAL_NODE.has(next)) lane.marks.push({ state: next, at });
    lane.state = next;
    lane.since = at;
  }
  for (const lane of lanes.values()) {
    if (lane.state && !TERMINAL_NODE.has(lane.state)) lane.bars.push({ state: lane.state, from: lane.since, to: Math.max(endMs, lane.since) });
  }
  return lanes;
}

/** A tick's label: `30s`, `2m`, `1h30m`. */
export function fmtTick(ms) {
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return s % 60 ? `${Math.floor(s / 60)}m${s % 60}s` : `${s / 60}m`;
  return s % 3600 ? `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60)}m` : `${s / 3600}h`;
}

/** Ticks for an axis of `span` ms: a round step giving about `want` of them. */
export function ticks(span, want = 6) {
  const steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400]
    .map((x) => x * 1000);
  const step = steps.find((x) => span / x <= want) || Math.ceil(span / want / 86400000) * 86400000;
  const out = [];
  for (let t = 0; t <= span; t += step) out.push(t);
  return out;
}
