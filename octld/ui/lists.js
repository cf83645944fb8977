// The runs list and the inbox. Both are redrawn by key on every change (dom.reconcile), so
// an answer half typed, the focus and the scroll stay where the person left them.

import { h, reconcile, known } from './dom.js';
import { STATUSES, countsText, fmtCost, basename, runSpan, matchesFilter, ruleFor, inputFields, nextStep, fmtDuration } from './model.js';
import { confirmDialog, textInput, busy, acts } from './ui.js';

const ATT_CLASS = (a) => `attn attn-${String(a).replace(' ', '-')}`;

/** A ticking elapsed time: app.js updates every `.elapsed` once a second. */
export function elapsed(from, to) {
  if (from == null) return h('span', { class: 'muted', text: '-' });
  return h('span', { class: 'elapsed', 'data-from': from, 'data-to': to ?? '', text: fmtDuration(((to ?? Date.now()) - from) / 1000) });
}

export function statusBadge(status) {
  return h('span', { class: `badge ${known('status-', status, STATUSES)}`, text: status });
}

// ---- runs

export function runsView(ctx) {
  const filter = h('input', { type: 'search', test: 'filter', placeholder: 'Filter: id, title, repo, status', 'aria-label': 'Filter runs', autocomplete: 'off' });
  const rows = h('div', { class: 'rows', role: 'list' });
  const count = h('p', { class: 'muted count-line' });
  const el = h('section', { class: 'runs', test: 'runs', 'aria-label': 'Runs' },
    h('div', { class: 'list-head' }, filter), count, rows);
  filter.addEventListener('input', () => { ctx.state.filter = filter.value; ctx.render(); });

  const row = (e) => {
    const r = e.summary;
    const [from, to] = runSpan(r);
    return h('button', { type: 'button', class: ['run-row', ctx.state.route.run === r.id && 'current'], test: 'run-row', 'data-run': r.id,
      'aria-current': ctx.state.route.run === r.id ? 'page' : null, onclick: () => ctx.go({ view: 'run', run: r.id }) },
    h('span', { class: 'row-top' },
      h('span', { class: 'title', text: r.title || `${r.kind} run` }),
      statusBadge(r.status), e.attention && h('span', { class: ATT_CLASS(e.attention), text: e.attention })),
    h('span', { class: 'row-counts', text: countsText(r.nodes) }),
    h('span', { class: 'row-meta muted' },
      h('span', { class: 'mono', text: r.id.slice(0, 10) }), ' · ', h('span', { text: r.kind }),
      r.repo && ' · ', r.repo && h('span', { title: r.repo, text: basename(r.repo) }),
      ' · ', elapsed(from, to), ' · ', h('span', { text: fmtCost(r.cost_usd) })));
  };

  return {
    el,
    update(entries) {
      if (filter.value !== ctx.state.filter && document.activeElement !== filter) filter.value = ctx.state.filter;
      const shown = entries.filter((e) => matchesFilter(e, ctx.state.filter));
      count.textContent = shown.length === entries.length ? `${entries.length} runs` : `${shown.length} of ${entries.length} runs`;
      const cur = ctx.state.route.run;
      reconcile(rows, shown, (e) => e.summary.id,
        (e) => JSON.stringify([e.summary, e.attention, cur === e.summary.id]), row);
    },
  };
}

// ---- inbox

function head(ctx, it, label, node, at) {
  return h('header', { class: 'item-head' },
    h('span', { class: ATT_CLASS(it.kind === 'merge' ? 'to merge' : it.kind), text: label }),
    h('button', { type: 'button', class: 'link', test: 'open-run', onclick: () => ctx.go({ view: 'run', run: it.run, node }) },
      it.title || it.run.slice(0, 10)),
    node && h('span', { class: 'muted', text: `node ${node}` }),
    at && h('span', { class: 'muted', text: new Date(at).toLocaleString() }));
}

function decide(ctx, it, params) {
  return ctx.rpc('node.permission_decide', { run: it.run, node: it.p.node, request: it.p.request, ...params });
}

function permissionItem(ctx, it) {
  const p = it.p;
  const rule = ruleFor(p.tool, p.input);
  const allow = h('button', { type: 'button', class: 'primary', test: 'allow', text: 'Allow' });
  const always = h('button', { type: 'button', test: 'allow-always', text: 'Allow always' });
  const deny = h('button', { type: 'button', class: 'danger', test: 'deny', text: 'Deny' });
  allow.onclick = () => busy(allow, async () => { await decide(ctx, it, { behavior: 'allow' }); ctx.refresh(it.run); });
  always.onclick = () => busy(always, async () => {
    const ok = await confirmDialog({ title: 'Allow always?', yes: 'Allow always',
      message: `Allow this request, and ${rule} for the rest of the run, without asking again.` });
    if (!ok) return;
    await decide(ctx, it, { behavior: 'allow', always: true });
    ctx.refresh(it.run);
  });
  deny.onclick = () => busy(deny, async () => {
    const reason = textInput('deny-reason', 'Reason (optional, the agent is told)');
    if (!await confirmDialog({ title: 'Deny the request?', yes: 'Deny', danger: true, extra: [reason.el] })) return;
    const r = reason.input.value.trim();
    await decide(ctx, it, r ? { behavior: 'deny', reason: r } : { behavior: 'deny' });
    ctx.refresh(it.run);
  });
  return h('article', { class: 'item', test: 'inbox-item', 'data-kind': 'permission', 'data-run': it.run },
    head(ctx, it, 'permission', p.node, p.asked_at),
    h('p', { class: 'tool' }, 'wants to use ', h('strong', { class: 'mono', text: p.tool })),
    h('dl', { class: 'fields' }, inputFields(p.input).map(([k, v]) => [h('dt', { class: 'mono', text: k }), h('dd', {}, h('pre', { class: 'wrap', text: v }))])),
    h('div', { class: 'actions' }, acts(allow, always, deny)));
}

function questionItem(ctx, it) {
  const d = it.d;
  const draftKey = `answer:${d.id}`;
  const input = h('textarea', { test: 'answer-input', rows: 3, placeholder: 'Your answer', 'aria-label': `Answer to ${d.title}` });
  input.value = ctx.state.drafts.get(draftKey) || '';
  const send = h('button', { type: 'button', class: 'primary', test: 'answer-send', text: 'Send' });
  const sync = () => { ctx.state.drafts.set(draftKey, input.value); send.disabled = !input.value.trim(); };
  input.addEventListener('input', sync);
  input.addEventListener('keydown', (e) => { if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) send.click(); });
  send.onclick = () => busy(send, async () => {
    if (!input.value.trim()) return;
    await ctx.rpc('discussion.answer', { id: d.id, text: input.value });
    ctx.state.drafts.delete(draftKey);
    ctx.refresh(it.run);
  });
  sync();
  return h('article', { class: 'item', test: 'inbox-item', 'data-kind': 'question', 'data-run': it.run },
    head(ctx, it, 'question', d.node, d.opened_at),
    h('p', { class: 'q-title', text: d.title }),
    d.body && h('pre', { class: 'wrap context', text: d.body }),
    input, h('div', { class: 'actions' }, acts(send)));
}

function proposalItem(ctx, it) {
  const sp = it.sp;
  const accept = h('button', { type: 'button', class: 'primary', test: 'accept', text: 'Accept' });
  const reject = h('button', { type: 'button', class: 'danger', test: 'reject', text: 'Reject' });
  accept.onclick = () => busy(accept, async () => {
    const r = await ctx.rpc('spinoff.accept', { id: sp.id });
    ctx.info(`Started run ${r?.run?.id || ''}`.trim());
    ctx.refresh(it.run);
  });
  reject.onclick = () => busy(reject, async () => {
    const reason = textInput('reject-reason', 'Why (required)', { required: true });
    if (!await confirmDialog({ title: 'Reject the proposal?', yes: 'Reject', danger: true, extra: [reason.el],
      valid: () => reason.input.value.trim() !== '' })) return;
    await ctx.rpc('spinoff.reject', { id: sp.id, reason: reason.input.value.trim() });
    ctx.refresh(it.run);
  });
  return h('article', { class: 'item', test: 'inbox-item', 'data-kind': 'proposal', 'data-run': it.run },
    head(ctx, it, 'proposal', sp.node, sp.proposed_at),
    h('pre', { class: 'wrap', text: sp.task }),
    sp.why && h('p', {}, h('span', { class: 'muted', text: 'Why: ' }), h('span', { text: sp.why })),
    sp.status === 'failed' && h('p', { class: 'err', text: `Its run could not be created: ${sp.reason || 'no reason given'}` }),
    h('div', { class: 'actions' }, acts(accept, reject)));
}

export async function mergeAction(ctx, run, node, { label } = {}) {
  const what = node ? `node ${node}` : 'the integration branch';
  const ok = await confirmDialog({ title: 'Merge?', yes: 'Merge', message: `Merge ${what} of ${label} into its target?` });
  if (!ok) return;
  const params = { run };
  if (node) params.node = node;
  const r = await ctx.rpc('merge', params);
  ctx.info(`Merged ${what}: ${String(r?.merge_commit || '').slice(0, 12)}`);
  ctx.refresh(run);
}

function mergeItem(ctx, it) {
  const n = it.node;
  const merge = h('button', { type: 'button', class: 'primary', test: 'merge', text: 'Merge' });
  merge.onclick = () => busy(merge, () => mergeAction(ctx, it.run, n?.id, { label: it.title || it.run }));
  const open = n && h('button', { type: 'button', test: 'open-diff', text: 'Diff', onclick: () => ctx.go({ view: 'run', run: it.run, node: n.id, tab: 'diff' }) });
  const files = n?.conflict_files || [];
  return h('article', { class: 'item', test: 'inbox-item', 'data-kind': it.kind, 'data-run': it.run },
    head(ctx, it, it.kind === 'merge' ? 'to merge' : it.kind, n?.id, n?.updated_at),
    it.integration && h('p', {}, 'Integration branch ', h('span', { class: 'mono', text: it.integration })),
    files.length > 0 && h('ul', { class: 'files mono' }, files.map((f) => h('li', { text: f }))),
    n?.reason && h('pre', { class: 'wrap', text: n.reason }),
    h('p', { class: 'next', test: 'next-step', text: nextStep(it) }),
    h('div', { class: 'actions' }, acts(merge), open));
}

const MAKE = { permission: permissionItem, question: questionItem, proposal: proposalItem, conflict: mergeItem, blocked: mergeItem, merge: mergeItem };

export function inboxView(ctx) {
  const list = h('div', { class: 'items' });
  const empty = h('p', { class: 'empty muted', text: 'Nothing needs you.' });
  const el = h('section', { class: 'inbox', test: 'inbox', 'aria-label': 'Inbox' }, h('h2', { text: 'Inbox' }), empty, list);
  return {
    el,
    update(items) {
      empty.hidden = items.length > 0;
      reconcile(list, items, (it) => it.key, (it) => JSON.stringify(it), (it) => MAKE[it.kind](ctx, it));
    },
  };
}
