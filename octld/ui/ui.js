// Page-wide pieces: the in-page confirmation dialog (never window.confirm: it blocks the
// page, cannot hold a checkbox and cannot be tested), the status line for errors, the
// connection banner, and a helper that runs an action with its button held.

import { h, fill } from './dom.js';

/**
 * Asks first. Resolves true on yes. `extra`: controls shown in the dialog (a reason, a
 * checkbox); `valid()` gates the yes button (a required reason).
 */
export function confirmDialog({ title, message, yes = 'Yes', danger = false, extra = [], valid = () => true }) {
  return new Promise((resolve) => {
    const yesBtn = h('button', { type: 'button', class: danger ? 'danger' : 'primary', test: 'confirm-yes', text: yes });
    const noBtn = h('button', { type: 'button', test: 'confirm-no', text: 'Back' });
    const dlg = h('dialog', { class: 'confirm', test: 'confirm', 'aria-label': title },
      h('h3', { text: title }), message && h('p', { class: 'confirm-msg', text: message }),
      ...extra, h('div', { class: 'actions' }, noBtn, yesBtn));
    const check = () => { yesBtn.disabled = !valid(); };
    let settled = false;
    const done = (v) => {
      if (settled) return;
      settled = true;
      if (dlg.open) dlg.close();
      dlg.remove();
      resolve(v);
    };
    dlg.addEventListener('input', check);
    dlg.addEventListener('change', check);
    dlg.addEventListener('cancel', (e) => { e.preventDefault(); done(false); });
    dlg.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && e.target.tagName === 'INPUT' && e.target.type !== 'checkbox' && valid()) { e.preventDefault(); done(true); }
    });
    yesBtn.addEventListener('click', () => valid() && done(true));
    noBtn.addEventListener('click', () => done(false));
    check();
    document.body.appendChild(dlg);
    dlg.showModal();
    (dlg.querySelector('input:not([type=checkbox]), textarea') || noBtn).focus();
  });
}

/** A labelled checkbox for a dialog. */
export function checkbox(test, label) {
  const box = h('input', { type: 'checkbox', test });
  return { box, el: h('label', { class: 'check' }, box, ' ', label) };
}

/** A labelled text input for a dialog. */
export function textInput(test, label, { required = false, maxlength = 4096 } = {}) {
  const input = h('input', { type: 'text', test, maxlength, required, autocomplete: 'off' });
  return { input, el: h('label', { class: 'field' }, h('span', { text: label }), input) };
}

const statusEl = () => document.querySelector('[data-test="status"]');
let statusTimer = null;

/** Shows an error whole (the daemon's message and hint), until dismissed or replaced. */
export function showError(err) {
  const msg = err && err.message ? err.message : String(err);
  const hint = err && err.hint ? err.hint : null;
  show('error', msg, hint, 0);
}

export function showInfo(msg, ms = 4000) {
  show('info', msg, null, ms);
}

function show(kind, msg, hint, ms) {
  const el = statusEl();
  if (!el) return;
  clearTimeout(statusTimer);
  el.className = `status status-${kind}`;
  fill(el, h('span', { class: 'status-text', text: msg }), hint && h('span', { class: 'status-hint', text: hint }),
    h('button', { type: 'button', class: 'dismiss', 'aria-label': 'dismiss', text: '×', onclick: () => { el.hidden = true; } }));
  el.hidden = false;
  if (ms) statusTimer = setTimeout(() => { el.hidden = true; }, ms);
}

let bannerTimer = null;

/** The connection banner: text, or null to hide it; `ms` hides it after a while. */
export function setBanner(text, kind = 'down', ms = 0) {
  const el = document.querySelector('[data-test="conn-banner"]');
  if (!el) return;
  clearTimeout(bannerTimer);
  el.hidden = !text;
  el.className = `banner banner-${kind}`;
  el.textContent = text || '';
  if (text && ms) bannerTimer = setTimeout(() => { el.hidden = true; }, ms);
}

/**
 * A group of action buttons (they change something in octld): a fieldset, so that while
 * octld is down `holdActions` disables the group without touching each button's own
 * `disabled` (an empty answer's Send, a button held by `busy`).
 */
export function acts(...buttons) {
  return h('fieldset', { class: 'acts' }, buttons);
}

export const DOWN_TITLE = 'octld is not answering: actions wait until the page has reconnected';

/** Holds every action (each `acts` group) while octld is down, each button saying why in
 * its title; gives them back, titles included, when it is up. */
export function holdActions(down) {
  for (const f of document.querySelectorAll('fieldset.acts')) {
    if (f.disabled !== down) f.disabled = down;
    for (const b of f.querySelectorAll('button')) {
      if (down && b.title !== DOWN_TITLE) {
        if (b.hasAttribute('title')) b.dataset.title = b.title;
        b.title = DOWN_TITLE;
      } else if (!down && b.title === DOWN_TITLE) {
        if ('title' in b.dataset) b.title = b.dataset.title; else b.removeAttribute('title');
        delete b.dataset.title;
      }
    }
  }
}

/** Runs an action with its button disabled meanwhile; an error goes to the status line. */
export async function busy(btn, fn) {
  // A new action: the last one's error has been read.
  const st = statusEl();
  if (st && st.classList.contains('status-error')) st.hidden = true;
  if (btn) btn.disabled = true;
  try {
    return await fn();
  } catch (e) {
    showError(e);
    return undefined;
  } finally {
    if (btn) btn.disabled = false;
  }
}
