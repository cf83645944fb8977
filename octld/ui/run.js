// One run: its header and actions, the plan graph, the timeline, the nodes, and the selected
// node's Screen, Log, Diff and Events. Mounted once per run and updated in place on every
// change, so the selected tab, the scroll, the diff's comments and a line being typed stay.

import { h, fill, reconcile, known } from './dom.js';
import { ALIVE, NODE_STATE_SET, ENDED, TABS, fmtCost, runSpan, nodeSpan, countsText, mergeTarget, retryTarget,
  cancellable, defaultNode, defaultTab, lastReviewTip, millis } from './model.js';
import { graphSvg, timelineSvg } from './charts.js';
import { parseDiff, renderDiff } from './diff.js';
import { confirmDialog, checkbox, busy, acts } from './ui.js';
import { elapsed, statusBadge, mergeAction } from './lists.js';

// What the timeline's colours mean (the bars are the node's states over time).
const LEGEND = [['pending', 'waiting to start'], ['starting', 'starting, queued'], ['running', 'running'], ['waiting', 'waiting for input'],
  ['done', 'done, gating'], ['merging', 'merging'], ['merged', 'merged'], ['conflict', 'conflict'], ['failed', 'failed']];
const TAB_LABEL = { screen: 'Screen', log: 'Log', diff: 'Diff', events: 'Events' };
const firstLine = (t) => String(t).split('\n').find((l) => l.trim()) || '';

/** Calls `fn` at most once per `gap` ms (live events come in bursts), never two at once. */
function loader(fn, gap = 2000) {
  let last = 0; let inflight = false; let timer = null; let again = false;
  const go = async () => {
    timer = null;
    if (inflight) { again = true; return; }
    inflight = true;
    last = Date.now();
    try { await fn(); } finally {
      inflight = false;
      if (again) { again = false; run(); }
    }
  };
  const run = (now = false) => {
    if (timer) { if (!now) return; clearTimeout(timer); }
    timer = setTimeout(go, now ? 0 : Math.max(0, last + gap - Date.now()));
  };
  run.cancel = () => clearTimeout(timer);
  return run;
}

/** Sets a pre's text, keeping it scrolled to the end if it was there (a terminal's habit). */
function setText(pre, text, first) {
  const atEnd = first || pre.scrollHeight - pre.scrollTop - pre.clientHeight < 8;
  if (pre.textContent !== text) pre.textContent = text;
  if (atEnd) pre.scrollTop = pre.scrollHeight;
}

// ---- panes

function screenPane(ctx, run, nodeId) {
  const key = `${run}/${nodeId}`;
  const pre = h('pre', { class: 'term', test: 'screen', tabindex: 0, 'aria-label': 'Agent screen' });
  const note = h('p', { class: 'muted' });
  const toggle = h('button', { type: 'button', test: 'type-toggle', 'aria-pressed': 'false', text: 'Type into the agent' });
  const input = h('input', { type: 'text', test: 'type-input', maxlength: 4096, autocomplete: 'off', placeholder: 'One line, sent with Enter', 'aria-label': 'Line to type into the agent' });
  const send = h('button', { type: 'submit', class: 'primary', test: 'type-send', text: 'Send' });
  const form = h('form', { class: 'type-form' }, input, acts(send));
  input.value = ctx.state.drafts.get(`type:${key}`) || '';
  input.addEventListener('input', () => ctx.state.drafts.set(`type:${key}`, input.value));
  const setOpen = (open) => {
    form.hidden = !open;
    toggle.setAttribute('aria-pressed', String(open));
    toggle.classList.toggle('on', open);
    if (open) ctx.state.typing.add(key); else ctx.state.typing.delete(key);
  };
  setOpen(ctx.state.typing.has(key));
  toggle.onclick = () => { setOpen(form.hidden); if (!form.hidden) input.focus(); };
  let alive = false; let inflight = false; let first = true;
  const poll = async () => {
    if (inflight || document.hidden || !alive) return;
    inflight = true;
    try {
      const r = await ctx.rpc('node.screen', { run, node: nodeId, lines: 200 });
      setText(pre, r.screen || '', first);
      first = false;
      note.textContent = '';
    } catch (e) { note.textContent = e.message; } finally { inflight = false; }
  };
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    // node.send takes one line: no newline or other control character but tab.
    const text = input.value.replace(/[\x00-\x08\x0a-\x1f\x7f]+/g, ' ');
    if (!text.trim()) return;
    busy(send, async () => {
      await ctx.rpc('node.send', { run, node: nodeId, text });
      input.value = '';
      ctx.state.drafts.delete(`type:${key}`);
      setTimeout(poll, 300);
    });
  });
  // Only while shown: the pane's timer goes with it (destroy), and a hidden tab skips.
  const timer = setInterval(poll, 2000);
  return {
    el: h('div', { class: 'screen-pane' }, h('div', { class: 'toolbar' }, toggle), form, note, pre),
    update(node, shown) {
      // Only a code run's agent reads input (the others work alone): no box that always fails.
      toggle.hidden = shown.manifest.kind !== 'code';
      if (toggle.hidden) setOpen(false);
      const was = alive;
      alive = ALIVE.has(node.state);
      if (!alive) note.textContent = `The agent is not running (${node.state}): its Log tab has what it printed.`;
      if (alive && !was) poll();
    },
    destroy() { clearInterval(timer); },
  };
}

function logPane(ctx, run, nodeId) {
  const pre = h('pre', { class: 'term', test: 'log', tabindex: 0, 'aria-label': 'Agent log' });
  const note = h('span', { class: 'muted' });
  let first = true;
  const load = loader(async () => {
    try {
      const r = await ctx.rpc('node.log', { run, node: nodeId });
      note.textContent = r.truncated ? 'its last 256 KiB' : r.log ? '' : 'The log is empty.';
      setText(pre, r.log || '', first);
      first = false;
    } catch (e) { note.textContent = e.message; }
  }, 3000);
  const refresh = h('button', { type: 'button', test: 'log-refresh', text: 'Refresh', onclick: () => load(true) });
  return { el: h('div', {}, h('div', { class: 'toolbar' }, refresh, note), pre), update: () => load(), destroy: load.cancel };
}

function diffPane(ctx, run, nodeId) {
  const key = `${run}/${nodeId}`;
  if (!ctx.state.reviews.has(key)) ctx.state.reviews.set(key, { comments: [], text: '' });
  const st = ctx.state.reviews.get(key);
  const mode = h('button', { type: 'button', test: 'diff-mode' });
  const since = h('button', { type: 'button', test: 'diff-since', text: 'Since last review', hidden: true });
  const info = h('span', { class: 'muted diff-info' });
  const box = h('div', { class: 'diff', test: 'diff' });
  const narrow = window.matchMedia('(max-width: 700px)');
  let files = []; let sig = null; let tip = null;

  // The review: each comment is typed under its line (an editor each, kept across redraws so
  // its text, focus and caret stay); the box above the diff gathers them and sends them.
  const list = h('ol', { class: 'comments' });
  const count = h('span', { class: 'muted' });
  const text = h('textarea', { test: 'review-text', rows: 2, placeholder: 'A longer review (optional)', 'aria-label': 'Review text' });
  const send = h('button', { type: 'button', class: 'primary', test: 'review-send', text: 'Send review' });
  const approve = h('button', { type: 'button', test: 'approve', text: 'Approve' });
  const editors = new Map();
  const summary = () => {
    const n = st.comments.filter((c) => c.text.trim()).length;
    count.textContent = st.comments.length ? `${n} comment${n === 1 ? '' : 's'}` : 'click a line of the diff to comment on it';
    fill(list, st.comments.map((c) => h('li', {}, h('span', { class: 'mono', text: c.anchor }), ' ',
      h('span', { class: 'muted', text: firstLine(c.text) || '(empty)' }))));
    send.disabled = !n && !st.text.trim();
  };
  const remove = (c) => {
    st.comments = st.comments.filter((x) => x !== c);
    editors.get(c)?.remove();
    editors.delete(c);
    paint();
  };
  const editor = (c) => {
    if (editors.has(c)) return editors.get(c);
    const ta = h('textarea', { test: 'comment-input', rows: 2, placeholder: 'Your comment', 'aria-label': `Comment on ${c.anchor}` });
    ta.value = c.text;
    ta.addEventListener('input', () => { c.text = ta.value; summary(); });
    const el = h('div', { class: 'comment-editor', test: 'comment' }, h('span', { class: 'mono anchor', text: c.anchor }), ta,
      h('button', { type: 'button', class: 'link', test: 'comment-remove', text: 'Remove', onclick: () => remove(c) }));
    editors.set(c, el);
    return el;
  };
  const linesAt = (anchor) => [...box.querySelectorAll('[data-test="diff-line"]')].filter((l) => l.dataset.anchor === anchor);
  const place = (c) => {
    const same = linesAt(c.anchor);
    const line = same[Math.min(c.occ, same.length - 1)];
    if (!line) { box.prepend(editor(c)); return; }
    line.classList.add('commented');
    (line.closest('.srow') || line).after(editor(c));
  };
  const paint = () => {
    const split = ctx.state.diffSplit && !narrow.matches;
    mode.textContent = ctx.state.diffSplit ? 'Side by side' : 'Unified';
    mode.setAttribute('aria-pressed', String(ctx.state.diffSplit));
    mode.title = narrow.matches && ctx.state.diffSplit ? 'side by side needs a wider window: shown unified' : 'unified or side by side';
    summary();
    if (sig === null) return;
    const active = box.contains(document.activeElement) ? document.activeElement : null;
    const caret = active ? [active.selectionStart, active.selectionEnd] : [];
    fill(box, files.length ? renderDiff(files, { split }) : h('p', { class: 'muted', text: 'No changes.' }));
    st.comments.forEach(place);
    if (active?.isConnected) {
      active.focus({ preventScroll: true });
      if (caret[0] != null) active.setSelectionRange(caret[0], caret[1]);
    }
  };
  box.addEventListener('click', (e) => {
    const line = e.target.closest('[data-test="diff-line"]');
    if (!line || !box.contains(line) || String(window.getSelection() || '').length) return; // selecting text
    const c = { anchor: line.dataset.anchor, occ: linesAt(line.dataset.anchor).indexOf(line), text: '' };
    st.comments.push(c);
    place(c);
    summary();
    editors.get(c).querySelector('textarea').focus({ preventScroll: true });
  });
  text.value = st.text;
  text.addEventListener('input', () => { st.text = text.value; summary(); });
  send.onclick = () => busy(send, async () => {
    const comments = st.comments.filter((c) => c.text.trim()).map((c) => `${c.anchor}: ${c.text.trim()}`);
    const params = { run, node: nodeId };
    if (comments.length) params.comments = comments;
    if (st.text.trim()) params.text = st.text;
    const r = await ctx.rpc('node.review', params);
    st.comments = []; st.text = ''; text.value = '';
    editors.forEach((el) => el.remove());
    editors.clear();
    paint();
    ctx.info(`Review round ${r?.review?.round ?? ''} sent (${r?.review?.way || 'recorded'})`);
    ctx.refresh(run);
  });
  approve.onclick = () => busy(approve, async () => {
    if (!await confirmDialog({ title: 'Approve the work?', yes: 'Approve', message: `Accept node ${nodeId}'s work as it is (a run that holds done nodes for review merges it).` })) return;
    await ctx.rpc('node.review', { run, node: nodeId, approve: true });
    ctx.refresh(run);
  });

  const load = loader(async () => {
    const useSince = ctx.state.diffSince.has(key) && tip;
    try {
      const r = await ctx.rpc('node.diff', useSince ? { run, node: nodeId, since: tip } : { run, node: nodeId });
      info.textContent = `against ${useSince ? 'the last review' : r.base} (${String(r.from || '').slice(0, 12)})${r.truncated ? ' · cut: too large to show whole' : ''}`;
      const next = `${useSince}\n${r.diff}`;
      if (next !== sig) { sig = next; files = parseDiff(r.diff); paint(); }
    } catch (e) {
      sig = null;
      info.textContent = '';
      fill(box, h('p', { class: 'err', text: e.message }));
    }
  }, 5000); // git diff in the worktree is the daemon's work: not on every event of a busy run
  mode.onclick = () => {
    ctx.state.diffSplit = !ctx.state.diffSplit;
    try { localStorage.setItem('octl.diffSplit', ctx.state.diffSplit ? '1' : ''); } catch { /* private mode */ }
    paint();
  };
  since.onclick = () => {
    if (ctx.state.diffSince.has(key)) ctx.state.diffSince.delete(key); else ctx.state.diffSince.add(key);
    since.setAttribute('aria-pressed', String(ctx.state.diffSince.has(key)));
    load(true);
  };
  narrow.addEventListener('change', paint);
  paint();
  return {
    el: h('div', { class: 'diff-pane' },
      h('div', { class: 'toolbar' }, mode, since, h('button', { type: 'button', test: 'diff-refresh', text: 'Refresh', onclick: () => load(true) }), info),
      h('aside', { class: 'review', test: 'review-box', 'aria-label': 'Review' },
        h('div', { class: 'review-head' }, h('strong', { text: 'Review' }), ' ', count), list, text, h('div', { class: 'actions' }, acts(send, approve))),
      box),
    update(node) {
      tip = lastReviewTip(node);
      since.hidden = !tip;
      since.setAttribute('aria-pressed', String(ctx.state.diffSince.has(key)));
      approve.hidden = node.state !== 'done' || node.approved;
      load();
    },
    destroy() { load.cancel(); narrow.removeEventListener('change', paint); },
  };
}

function eventsPane(ctx, run, nodeId) {
  const list = h('ol', { class: 'events', test: 'events' });
  const more = h('p', { class: 'muted' });
  let last = -1;
  return {
    el: h('div', {}, list, more),
    update() {
      const evs = ctx.events(run).filter((e) => e.node === nodeId);
      const top = evs.length ? evs[evs.length - 1].seq : 0;
      if (top === last) return;
      last = top;
      const shown = evs.slice(-500).reverse();
      more.textContent = evs.length > shown.length ? `${evs.length - shown.length} older events not shown` : '';
      fill(list, shown.map((ev) => h('li', { class: 'event', test: 'event' },
        h('div', { class: 'ev-head' }, h('span', { class: 'mono ev-type', text: ev.type }),
          h('time', { class: 'muted', text: new Date(ev.ts).toLocaleString() }), h('span', { class: 'muted', text: `#${ev.seq} · ${ev.actor}` })),
        ev.data && Object.keys(ev.data).length > 0 && h('pre', { class: 'wrap ev-data', text: JSON.stringify(ev.data, null, 2) }))));
      if (!evs.length) list.appendChild(h('li', { class: 'muted', text: 'No events of this node yet.' }));
    },
    destroy() {},
  };
}

const PANES = { screen: screenPane, log: logPane, diff: diffPane, events: eventsPane };

// ---- the view

/** What a live agent is doing, when known ("unknown" says nothing: nothing is shown). */
function activityOf(n) {
  const a = ALIVE.has(n.state) ? n.activity : null;
  if (!a) return null;
  const state = a.state && a.state !== 'unknown' ? a.state : null;
  return { state, text: [state, a.detail].filter(Boolean).join(': ') || null };
}

function nodeRow(n, selected, onclick) {
  const [from, to] = nodeSpan(n);
  const doing = activityOf(n)?.state;
  return h('button', { type: 'button', class: ['node-row', selected && 'current'], test: 'node-row', 'data-node': n.id,
    'aria-current': selected ? 'true' : null, onclick },
  h('span', { class: 'row-top' }, h('span', { class: 'mono title', text: n.id }),
    h('span', { class: `badge ${known('state-', n.state, NODE_STATE_SET)}`, text: n.state }),
    doing && h('span', { class: 'muted', text: doing })),
  n.task && h('span', { class: 'row-task muted', text: firstLine(n.task) }),
  h('span', { class: 'row-meta muted' }, elapsed(from, to), ' · ', fmtCost(n.cost_usd)));
}

function nodeInfo(n) {
  const kv = (k, v) => (v == null || v === '' ? null : [h('dt', { text: k }), h('dd', { class: 'wrap', text: String(v) })]);
  return [
    n.task && h('details', { class: 'task', open: n.task.length < 600 }, h('summary', { text: 'Task' }), h('pre', { class: 'wrap', text: n.task })),
    h('dl', { class: 'kv' },
      kv('activity', activityOf(n)?.text), kv('message', n.message), kv('reason', n.reason),
      kv('waiting for', (n.waiting_for || []).join('; ')), kv('agent', n.agent),
      kv('branch', n.branch && `${n.branch_removed ? '(removed) ' : ''}${n.branch}`),
      kv('worktree', n.worktree && `${n.worktree_removed ? '(removed) ' : ''}${n.worktree}`),
      kv('deps', (n.deps || []).join(', ')), kv('conflicting files', (n.conflict_files || []).join(', ')),
      kv('exit status', n.exit_status), kv('reviews', n.reviews?.length ? `${n.reviews.length}${n.approved ? ', approved' : ''}` : null),
      kv('result', n.outcome?.result), kv('error', n.outcome?.error), kv('cost', n.cost_usd != null ? fmtCost(n.cost_usd) : null)),
  ];
}

export function mountRun(ctx, runId) {
  const title = h('h2', { class: 'run-title', text: 'Loading…' });
  const meta = h('div', { class: 'run-meta' });
  const note = h('p', { class: 'err run-note', hidden: true });
  // Each shown only where it applies (update): Merge where something waits for a merge,
  // Retry on a node that failed or could not merge, Cancel while the run has not ended.
  const mergeBtn = h('button', { type: 'button', test: 'merge', hidden: true, text: 'Merge' });
  const retryBtn = h('button', { type: 'button', test: 'retry', hidden: true, text: 'Retry' });
  const cancelBtn = h('button', { type: 'button', class: 'danger', test: 'cancel', hidden: true, text: 'Cancel' });
  const actions = h('div', { class: 'actions', hidden: true }, acts(mergeBtn, retryBtn, cancelBtn));
  const graphBox = h('div', { class: 'chart-box' });
  const timeBox = h('div', { class: 'chart-box' });
  const nodeRows = h('div', { class: 'node-rows', role: 'list' });
  const nodeTitle = h('h3', { class: 'node-title' });
  const infoBox = h('div', { class: 'node-info' });
  const tabs = Object.fromEntries(TABS.map((t) => [t, h('button', { type: 'button', role: 'tab', test: `tab-${t}`, text: TAB_LABEL[t],
    onclick: () => go(sel.node, t) })]));
  const paneBox = h('div', { class: 'pane-box', role: 'tabpanel' });
  const detail = h('section', { class: 'node-detail' }, nodeTitle, infoBox, h('div', { class: 'tabs', role: 'tablist' }, Object.values(tabs)), paneBox);
  const el = h('section', { class: 'run-view', test: 'run-view', 'data-run': runId },
    h('header', { class: 'run-head' },
      h('button', { type: 'button', class: 'back link', test: 'back', text: '← Runs', onclick: () => ctx.go({ view: 'runs' }) }),
      title, meta, note, actions),
    h('div', { class: 'charts' },
      h('section', { class: 'chart' }, h('h3', { text: 'Plan' }), graphBox),
      h('section', { class: 'chart' }, h('h3', { text: 'Timeline' }), timeBox,
        h('div', { class: 'legend muted' }, LEGEND.map(([st, text]) => h('span', { class: `swatch state-${st}`, text }))))),
    h('section', { class: 'nodes' }, h('h3', { text: 'Nodes' }), nodeRows),
    detail);

  let shown = null;
  const sel = { node: null, tab: null };
  let pane = null; let paneKey = ''; let infoSig = '';
  const go = (node, tab) => ctx.go({ view: 'run', run: shown ? shown.manifest.id : runId, node, tab });
  const label = () => shown?.manifest?.title || shown?.manifest?.id || runId;

  const drawTimeline = () => {
    if (!shown) return;
    const m = shown.manifest;
    const end = ENDED.has(m.status) ? Math.max(millis(m.updated_at) ?? 0, ...ctx.events(m.id).slice(-1).map((e) => millis(e.ts) ?? 0)) : Date.now();
    fill(timeBox, timelineSvg(shown, ctx.events(m.id), end, (timeBox.clientWidth || 650) - 10, sel.node, (id) => go(id, sel.tab)));
  };
  // The graph lies across when it fits its box's width, else top to bottom (a phone).
  const drawGraph = () => {
    if (!shown) return;
    const nodes = shown.nodes || [];
    const avail = graphBox.clientWidth ? graphBox.clientWidth - 8 : null; // its padding
    fill(graphBox, nodes.length ? graphSvg(shown, sel.node, (id) => go(id, sel.tab), avail) : h('p', { class: 'muted', text: 'No nodes yet.' }));
  };
  let resizeTimer = null;
  const onResize = () => { clearTimeout(resizeTimer); resizeTimer = setTimeout(() => { drawGraph(); drawTimeline(); }, 150); };
  window.addEventListener('resize', onResize);
  // A live run's bars grow with time, events or not.
  const clock = setInterval(() => { if (shown && !ENDED.has(shown.manifest.status) && !document.hidden) drawTimeline(); }, 5000);

  // A button names the node it acts on (Merge may act on another than the selected one).
  const target = (btn, verb, what) => fill(btn, verb, ' ', h('span', { class: 'mono btn-target', text: what }));
  const drawActions = () => {
    const m = shown.manifest;
    const mt = mergeTarget(shown, sel.node);
    const rt = retryTarget(shown, sel.node);
    mergeBtn.hidden = !mt;
    if (mt) {
      if (mt.node) target(mergeBtn, 'Merge', mt.node); else fill(mergeBtn, 'Merge integration branch');
      mergeBtn.title = mt.node ? `Merge node ${mt.node} into its target` : `Merge the integration branch into ${m.base || 'the base'}`;
    }
    retryBtn.hidden = !rt;
    if (rt) {
      target(retryBtn, 'Retry', rt.id);
      retryBtn.title = `Start node ${rt.id} (${rt.state}) again`;
    }
    cancelBtn.hidden = !cancellable(shown);
    actions.hidden = mergeBtn.hidden && retryBtn.hidden && cancelBtn.hidden;
  };

  mergeBtn.onclick = () => busy(mergeBtn, async () => {
    const t = mergeTarget(shown, sel.node);
    if (!t) throw new Error('Nothing in this run waits for a merge any more.');
    await mergeAction(ctx, shown.manifest.id, t.node, { label: label() });
  });
  retryBtn.onclick = () => busy(retryBtn, async () => {
    const n = retryTarget(shown, sel.node);
    if (!n) throw new Error(`Node ${sel.node} cannot be retried now.`);
    const resume = checkbox('resume', 'Continue its conversation instead of starting over');
    if (!await confirmDialog({ title: 'Retry?', yes: 'Retry', extra: n.session_id ? [resume.el] : [],
      message: `Start node ${n.id} (${n.state}) of ${label()} again? Its old branch and worktree are kept under a snapshot ref.` })) return;
    await ctx.rpc('run.retry', resume.box.checked ? { run: shown.manifest.id, node: n.id, resume: true } : { run: shown.manifest.id, node: n.id });
    ctx.refresh(shown.manifest.id);
  });
  cancelBtn.onclick = () => busy(cancelBtn, async () => {
    const discard = checkbox('discard', 'Also discard the work: remove its worktrees and branches');
    if (!await confirmDialog({ title: 'Cancel the run?', yes: 'Cancel run', danger: true, extra: [discard.el],
      message: `Stop every agent of ${label()}.` })) return;
    if (discard.box.checked && !await confirmDialog({ title: 'Discard the work?', yes: 'Discard', danger: true,
      message: 'Its worktrees and branches are removed; what they held stays only under refs/octl/snapshots/.' })) return;
    await ctx.rpc('run.cancel', { run: shown.manifest.id, discard: discard.box.checked });
    ctx.refresh(shown.manifest.id);
  });

  return {
    el,
    run: runId,
    update(entry, route) {
      if (!entry?.shown) {
        if (entry) title.textContent = entry.summary.title || entry.summary.id;
        return;
      }
      shown = entry.shown;
      const m = shown.manifest;
      const nodes = shown.nodes || [];
      title.textContent = m.title || `${m.kind} run`;
      const [from, to] = runSpan(m);
      fill(meta, statusBadge(m.status), entry.attention && h('span', { class: `attn attn-${entry.attention.replace(' ', '-')}`, text: entry.attention }),
        h('span', { text: m.kind }), h('span', { class: 'mono', text: m.id }), m.repo && h('span', { class: 'mono', text: m.repo }),
        m.base && h('span', { text: `base ${m.base}${m.settings?.integration ? ` ← ${m.settings.integration}` : ''}` }),
        h('span', { text: countsText(m.nodes) }), elapsed(from, to), h('span', { text: fmtCost(m.cost_usd) }));
      const problem = shown.corrupt ? `Corrupt log: ${JSON.stringify(shown.corrupt)}` : m.error;
      note.hidden = !problem;
      note.textContent = problem || '';

      const before = sel.node;
      // The node the address names; else the one already shown (a change elsewhere must
      // not move the person's place); else the one that most needs a look.
      const has = (id) => id && nodes.some((n) => n.id === id);
      sel.node = has(route.node) ? route.node : has(before) ? before : defaultNode(shown);
      const node = nodes.find((n) => n.id === sel.node) || null;
      // The tab the address names; else the one shown for this node; else the node's natural one.
      if (route.node === sel.node && route.tab) sel.tab = route.tab;
      else if (!(sel.node === before && sel.tab)) sel.tab = defaultTab(node);

      drawActions();
      drawGraph();
      drawTimeline();
      reconcile(nodeRows, nodes, (n) => n.id, (n) => JSON.stringify([n, n.id === sel.node]), (n) => nodeRow(n, n.id === sel.node, () => go(n.id, sel.tab)));

      detail.hidden = !node;
      if (!node) return;
      nodeTitle.textContent = `Node ${node.id}`;
      const sig = JSON.stringify(node);
      if (sig !== infoSig) { infoSig = sig; fill(infoBox, nodeInfo(node)); }
      for (const t of TABS) {
        tabs[t].setAttribute('aria-selected', String(t === sel.tab));
        tabs[t].classList.toggle('current', t === sel.tab);
      }
      const key = `${node.id}/${sel.tab}`;
      if (key !== paneKey) {
        pane?.destroy();
        pane = PANES[sel.tab](ctx, m.id, node.id);
        paneKey = key;
        fill(paneBox, pane.el);
      }
      pane.update(node, shown);
    },
    destroy() {
      pane?.destroy();
      clearInterval(clock);
      window.removeEventListener('resize', onResize);
    },
  };
}
