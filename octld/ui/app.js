// orchestratectl's web UI: the entry point. It holds what octld said (runs, the open run's
// events), follows the change feed, routes by the address's hash and redraws in place.
// Everything octld sends is an agent's output: see dom.js for how it reaches the page.

import { h, fill } from './dom.js';
import { session, rpc, follow } from './api.js';
import { parseRoute, routeHash, attentionOf, sortRuns, inboxItems, fmtDuration } from './model.js';
import { runsView, inboxView } from './lists.js';
import { mountRun } from './run.js';
import { setBanner, showError, showInfo, holdActions } from './ui.js';

const state = {
  route: parseRoute(location.hash),
  runs: new Map(), // id → {summary, shown (run.show, when read), attention}
  events: new Map(), // run id → {list, last}: the open run's events, for its timeline and tab
  filter: '',
  drafts: new Map(), // half-typed answers and lines, by what they are for
  reviews: new Map(), // `run/node` → {comments: [{anchor, text}], text}
  typing: new Set(), // `run/node` whose "type into the agent" box is open
  diffSince: new Set(),
  diffSplit: (() => { try { return localStorage.getItem('octl.diffSplit') === '1'; } catch { return false; } })(),
  pid: null,
  started: null,
  down: false,
  seen: null, // what needed the person at the last look (null before the first load)
};

const entryFor = (id) => state.runs.get(id) || [...state.runs.values()].find((e) => e.summary.id.startsWith(id));

const ctx = {
  state,
  rpc,
  go(r) {
    const hash = routeHash(r);
    if (location.hash !== hash) location.hash = hash; else onRoute();
  },
  refresh(id) {
    return refreshRun(id).then(render, showError);
  },
  render: () => render(),
  events: (id) => state.events.get(id)?.list || [],
  info: showInfo,
  error: showError,
};

// ---- loading

function entry(summary, shown) {
  const e = { summary, shown };
  e.attention = attentionOf(e);
  return e;
}

async function pool(items, n, fn) {
  const out = [];
  let i = 0;
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, async () => {
    while (i < items.length) { const k = i++; out[k] = await fn(items[k]); }
  }));
  return out;
}

const showOrNull = (id) => rpc('run.show', { run: id }).catch((e) => {
  if (e.kind === 'not_found') return null;
  throw e;
});

/** Everything, as the TUI reads it: every active and waiting run, any run with an open
 * question or proposal, the newest 500 others; the detail of those that may need a person. */
async function loadAll() {
  const [recent, live, questions, proposals] = await Promise.all([
    rpc('run.list', { limit: 500 }),
    rpc('run.list', { status: ['active', 'waiting'] }),
    rpc('discussion.list', { open: true }),
    rpc('spinoff.list', { open: true }),
  ]);
  const next = new Map();
  for (const r of [...recent, ...live]) next.set(r.id, entry(r, null));
  const detail = new Set([...live.map((r) => r.id), ...questions.map((d) => d.run), ...proposals.map((p) => p.run)]);
  if (state.route.view === 'run') detail.add(entryFor(state.route.run)?.summary.id || state.route.run);
  // A run that cannot be read now (gone, or an error) keeps its summary: one run must not
  // keep the others from showing.
  for (const sh of await pool([...detail], 8, (id) => showOrNull(id).catch(() => null))) {
    if (sh) next.set(sh.manifest.id, entry(sh.manifest, sh));
  }
  state.runs = next;
  const open = openRunId();
  if (open) await loadEvents(open);
}

async function refreshRun(id) {
  const sh = await showOrNull(id);
  if (!sh) { state.runs.delete(id); return; }
  state.runs.set(sh.manifest.id, entry(sh.manifest, sh));
  if (openRunId() === sh.manifest.id) await loadEvents(sh.manifest.id);
}

/** The open run's events: all once, then those after the last one held. */
async function loadEvents(id) {
  const c = state.events.get(id) || { list: [], last: 0 };
  const more = await rpc('event.list', c.last ? { run: id, since: c.last } : { run: id });
  for (const ev of more) if (ev.seq > c.last) { c.list.push(ev); c.last = ev.seq; }
  state.events.set(id, c);
}

function openRunId() {
  return state.route.view === 'run' ? entryFor(state.route.run)?.summary.id || null : null;
}

// ---- live: one refresh per run per 150 ms, whatever the burst

const timers = new Map();
function schedule(id) {
  if (timers.has(id)) return;
  timers.set(id, setTimeout(async () => {
    timers.delete(id);
    try { await refreshRun(id); render(); } catch (e) {
      if (e.kind === 'unauthorized') loggedOut(); else if (e.kind !== 'daemon_unreachable') showError(e);
    }
  }, 150));
}

function onEvent(ev) {
  if (typeof ev.run !== 'string') return;
  const c = state.events.get(ev.run);
  if (c && ev.seq === c.last + 1) { c.list.push(ev); c.last = ev.seq; }
  schedule(ev.run);
}

let loaded = false;
async function reload() {
  try {
    await loadAll();
    loaded = true;
    render();
  } catch (e) {
    if (e.kind === 'unauthorized') return loggedOut();
    showError(e);
  }
}

function onHello(hello) {
  const restarted = state.pid != null && (hello.pid !== state.pid || hello.started !== state.started);
  const wasDown = state.down;
  state.pid = hello.pid ?? state.pid;
  state.started = hello.started ?? state.started;
  state.down = false;
  holdActions(false);
  if (restarted) setBanner('octld restarted — reconnected', 'ok', 6000);
  else if (wasDown) setBanner(null);
  // A restarted daemon may have a new CSRF token; then read again what is shown.
  (restarted ? session().catch(() => {}) : Promise.resolve()).then(() => { if (restarted || wasDown || !loaded) reload(); });
}

function onDown(closed) {
  state.down = true;
  holdActions(true);
  setBanner('octld is not answering — reconnecting…', 'down');
  // A stream the server refused may mean this browser's session is gone.
  if (closed) session().catch((e) => { if (e.kind === 'unauthorized') loggedOut(); });
}

// ---- notifications: only for what starts needing the person while the page is open

const notifyBtn = () => document.querySelector('[data-test="notify-toggle"]');
const notifyOn = () => 'Notification' in window && Notification.permission === 'granted' && localStorage.getItem('octl.notify') === '1';

function drawNotify() {
  const b = notifyBtn();
  const on = notifyOn();
  b.textContent = on ? 'Notifying' : 'Notify';
  b.setAttribute('aria-pressed', String(on));
  b.title = on ? 'Notifications on: click to turn off' : 'Notify me when something needs me';
}

async function toggleNotify() {
  if (!('Notification' in window)) return showInfo('This browser cannot show notifications.');
  if (notifyOn()) localStorage.setItem('octl.notify', '');
  else {
    const p = Notification.permission === 'default' ? await Notification.requestPermission() : Notification.permission;
    if (p !== 'granted') showInfo('Notifications are blocked for this page in the browser’s settings.');
    else localStorage.setItem('octl.notify', '1');
  }
  drawNotify();
}

function notifyNew(entries, items) {
  const now = new Map();
  for (const e of entries) if (e.attention) now.set(`a:${e.summary.id}:${e.attention}`, [e.summary.id, e.attention, e.summary.title]);
  for (const it of items) now.set(it.key, [it.run, it.kind, it.title]);
  if (state.seen && notifyOn()) {
    const told = new Set();
    for (const [k, [run, why, title]] of now) {
      if (state.seen.has(k) || told.has(run)) continue;
      told.add(run);
      const n = new Notification(`octl: ${why}`, { body: title || run, tag: run });
      n.onclick = () => { window.focus(); ctx.go({ view: 'run', run }); };
    }
  }
  state.seen = new Set(now.keys());
}

// ---- drawing

const runs = runsView(ctx);
const inbox = inboxView(ctx);
let current = null; // the mounted run view
const placeholder = h('section', { class: 'placeholder muted' }, h('p', { text: 'Select a run to see its plan, timeline and nodes.' }));

function render() {
  const entries = sortRuns([...state.runs.values()]);
  const items = inboxItems(entries);
  runs.update(entries);
  inbox.update(items);
  const count = document.querySelector('[data-test="inbox-count"]');
  count.textContent = String(items.length);
  count.classList.toggle('zero', items.length === 0);
  for (const b of document.querySelectorAll('[data-route]')) {
    b.classList.toggle('current', b.dataset.route === state.route.view);
    if (b.dataset.route === state.route.view) b.setAttribute('aria-current', 'page'); else b.removeAttribute('aria-current');
  }
  const detail = document.getElementById('detail');
  let want = placeholder;
  if (state.route.view === 'inbox') want = inbox.el;
  if (state.route.view === 'run') {
    if (!current || current.run !== state.route.run) {
      current?.destroy();
      current = mountRun(ctx, state.route.run);
    }
    want = current.el;
  } else if (current) { current.destroy(); current = null; }
  if (detail.firstElementChild !== want) fill(detail, want);
  if (current) current.update(entryFor(state.route.run), state.route);
  holdActions(state.down); // the buttons just made too
  if (loaded) notifyNew(entries, items);
}

function onRoute() {
  const prev = state.route;
  state.route = parseRoute(location.hash);
  document.body.dataset.view = state.route.view;
  if (prev.view !== state.route.view || prev.run !== state.route.run) {
    document.getElementById('detail').scrollTop = 0;
    window.scrollTo(0, 0);
  }
  render();
  // A run opened for the first time (or known only by its summary): read it and its events.
  if (state.route.view === 'run') {
    const e = entryFor(state.route.run);
    const id = e?.summary.id || state.route.run;
    if (!e?.shown || !state.events.has(id)) ctx.refresh(id);
  }
}

let stopFeed = null;
function loggedOut() {
  stopFeed?.();
  setBanner(null);
  fill(document.querySelector('main'), h('section', { class: 'placeholder', test: 'logged-out' },
    h('h2', { text: 'Not logged in' }),
    h('p', { text: 'Open the one-time link that `orchestratectl ui` prints to log this browser in.' })));
}

// The elapsed times tick without a redraw.
setInterval(() => {
  const now = Date.now();
  for (const el of document.querySelectorAll('.elapsed')) {
    if (el.dataset.to) continue;
    el.textContent = fmtDuration((now - Number(el.dataset.from)) / 1000);
  }
}, 1000);

async function start() {
  document.body.dataset.view = state.route.view;
  fill(document.getElementById('list'), runs.el);
  document.querySelectorAll('[data-route]').forEach((b) => b.addEventListener('click', () => ctx.go({ view: b.dataset.route })));
  notifyBtn().addEventListener('click', toggleNotify);
  drawNotify();
  window.addEventListener('hashchange', onRoute);
  document.addEventListener('keydown', (e) => {
    if (e.key === '/' && !/^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement?.tagName || '') && !document.querySelector('dialog[open]')) {
      e.preventDefault();
      ctx.go({ view: 'runs' });
      document.querySelector('[data-test="filter"]').focus();
    }
  });
  render();
  try {
    await session();
  } catch (e) {
    if (e.kind === 'unauthorized') return loggedOut();
    onDown();
  }
  // The feed first, then the load (on its hello), so no change falls between the two; if the
  // hello is slow, load anyway.
  stopFeed = follow({ onHello, onEvent, onDown });
  setTimeout(() => { if (!loaded) reload(); }, 2500);
}

start();
