// The one way this UI makes nodes: createElement / createElementNS and textContent.
// Every string octld sends is an agent's output (titles, tasks, screens, diffs, …), so it is
// only ever text: no innerHTML anywhere, and no attribute that loads or runs something is
// set here at all (the CSP forbids inline script too; this is the second wall).

const SVG_NS = 'http://www.w3.org/2000/svg';
// Attributes that could load or run something: never set through this module, whatever
// the value, so a future caller cannot pass daemon data into one by mistake.
const FORBIDDEN = new Set(['href', 'xlink:href', 'src', 'srcdoc', 'style', 'action', 'formaction']);

/** An HTML element: props are attributes (`class`, `test` = data-test, `text`, `on<event>`). */
export function h(tag, props, ...kids) {
  return build(document.createElement(tag), props, kids);
}

/** An SVG element, the same way. */
export function s(tag, props, ...kids) {
  return build(document.createElementNS(SVG_NS, tag), props, kids);
}

function build(el, props, kids) {
  for (const [k, v] of Object.entries(props || {})) {
    if (v == null || v === false) continue;
    if (FORBIDDEN.has(k.toLowerCase())) throw new Error(`dom: attribute ${k} is not set here`);
    if (k.startsWith('on')) {
      if (typeof v !== 'function') throw new Error(`dom: ${k} needs a function`);
      el.addEventListener(k.slice(2), v);
    } else if (k === 'class') {
      el.setAttribute('class', Array.isArray(v) ? v.filter(Boolean).join(' ') : v);
    } else if (k === 'test') {
      el.setAttribute('data-test', v);
    } else if (k === 'text') {
      el.textContent = String(v);
    } else if (k === 'value' || k === 'checked' || k === 'disabled' || k === 'hidden') {
      el[k] = v;
    } else {
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, kids);
  return el;
}

/** Appends children: nodes as they are, strings and numbers as text nodes, null skipped. */
export function append(el, kids) {
  for (const k of kids.flat(Infinity)) {
    if (k == null || k === false) continue;
    el.appendChild(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return el;
}

/** Replaces an element's children. */
export function fill(el, ...kids) {
  el.replaceChildren();
  return append(el, kids);
}

/**
 * Makes `parent`'s children the items, by key: an item whose signature did not change keeps
 * its element (so focus, caret and half-typed text stay), a changed one is made again, and
 * elements are moved only when out of place (moving a node would blur it).
 */
export function reconcile(parent, items, keyOf, sigOf, make) {
  const old = new Map();
  for (const el of parent.children) old.set(el.dataset.key, el);
  const seen = new Set();
  let prev = null;
  for (const item of items) {
    const key = keyOf(item);
    const sig = sigOf(item);
    let el = old.get(key);
    if (!el || el.dataset.sig !== sig) {
      const fresh = make(item);
      fresh.dataset.key = key;
      fresh.dataset.sig = sig;
      if (el) {
        const focus = focusOf(el);
        el.replaceWith(fresh);
        refocus(fresh, focus);
      }
      el = fresh;
    }
    seen.add(key);
    const want = prev ? prev.nextElementSibling : parent.firstElementChild;
    if (want !== el) parent.insertBefore(el, want);
    prev = el;
  }
  for (const [key, el] of old) if (!seen.has(key)) el.remove();
}

/** Which control inside `el` has the focus (by its data-test), and its caret. */
export function focusOf(el) {
  const a = document.activeElement;
  if (!a || !el.contains(a) || !a.dataset.test) return null;
  return { test: a.dataset.test, start: a.selectionStart, end: a.selectionEnd };
}

export function refocus(el, f) {
  if (!f) return;
  const t = el.querySelector(`[data-test="${f.test}"]`);
  if (!t) return;
  t.focus();
  if (f.start != null && t.setSelectionRange) t.setSelectionRange(f.start, f.end);
}

/** A class name from a value the daemon sent, only if it is one we know (else `unknown`). */
export function known(prefix, value, set) {
  return prefix + (set.has(value) ? value : 'unknown');
}
