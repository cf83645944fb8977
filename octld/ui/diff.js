// A node's diff (node.diff's unified git diff): parsed into files, hunks and lines, each line
// named as a review comment names it (docs/TUI.md: `src/x.rs:42`, the new file's line; a
// removed line by the new line it was removed before; a deleted file by the file alone),
// and drawn unified or side by side with a light colouring of code tokens. All text is the
// agent's: it goes into the page through textContent only.

import { h } from './dom.js';

/** `"a/x\tb"` (git quotes unusual paths C-style) → `a/x<TAB>b`; other paths as they are. */
export function unquote(p) {
  if (!p.startsWith('"') || !p.endsWith('"') || p.length < 2) return p;
  const esc = { n: '\n', t: '\t', r: '\r', '"': '"', '\\': '\\', a: '\x07', b: '\b', f: '\f', v: '\v' };
  const bytes = [];
  const body = p.slice(1, -1);
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (c !== '\\') { bytes.push(...new TextEncoder().encode(c)); continue; }
    const n = body[++i];
    if (/[0-7]/.test(n)) { bytes.push(parseInt(body.slice(i, i + 3), 8)); i += 2; } else bytes.push((esc[n] ?? n).charCodeAt(0));
  }
  return new TextDecoder().decode(new Uint8Array(bytes));
}

function side(p, prefix) {
  const u = unquote(p.replace(/\t.*$/, ''));
  if (u === '/dev/null') return null;
  return u.startsWith(prefix) ? u.slice(prefix.length) : u;
}

/** `diff --git a/P b/P` → P (the fallback for files without ---/+++ lines). */
function gitPaths(rest) {
  const L = (rest.length - 5) / 2;
  if (Number.isInteger(L) && rest.startsWith('a/') && rest.slice(2, 2 + L) === rest.slice(L + 5)) {
    return [rest.slice(2, 2 + L), rest.slice(L + 5)];
  }
  const at = rest.lastIndexOf(' b/');
  return at > 0 ? [side(rest.slice(0, at), 'a/'), side(rest.slice(at + 1), 'b/')] : [rest, rest];
}

/**
 * Files of a unified diff: {old, new, path, status, meta[], hunks[{header, lines[]}], add, del}.
 * A line is {t: 'add'|'del'|'ctx'|'note', text, o, n, anchor}; hunks are read by their line
 * counts, so a removed line that starts with `--` is not taken for a header.
 */
export function parseDiff(text) {
  const files = [];
  let f = null;
  let hunk = null;
  let o = 0; let n = 0; let oLeft = 0; let nLeft = 0;
  const lines = String(text || '').split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  const start = (old, nw) => {
    f = { old, new: nw, path: nw ?? old ?? '', status: 'modified', meta: [], hunks: [], add: 0, del: 0 };
    files.push(f);
    hunk = null;
  };
  const anchor = (num) => (f.new == null || num == null ? f.path : `${f.path}:${num}`);
  for (const raw of lines) {
    const line = raw.replace(/\r$/, '');
    if (hunk && (oLeft > 0 || nLeft > 0)) {
      const c = line[0];
      const body = line.slice(1);
      if (c === '+') { hunk.lines.push({ t: 'add', text: body, o: null, n, anchor: anchor(n) }); n++; nLeft--; f.add++; continue; }
      if (c === '-') { hunk.lines.push({ t: 'del', text: body, o, n: null, anchor: anchor(n) }); o++; oLeft--; f.del++; continue; }
      if (c === ' ' || line === '') { hunk.lines.push({ t: 'ctx', text: body, o, n, anchor: anchor(n) }); o++; n++; oLeft--; nLeft--; continue; }
      if (c === '\\') { hunk.lines.push({ t: 'note', text: line, o: null, n: null, anchor: f.path }); continue; }
      oLeft = nLeft = 0; // a malformed hunk: read on as headers
    }
    if (line.startsWith('\\') && hunk) { hunk.lines.push({ t: 'note', text: line, o: null, n: null, anchor: f.path }); continue; }
    if (line.startsWith('diff --git ')) { const [a, b] = gitPaths(line.slice(11)); start(a, b); continue; }
    if (!f) start(null, null);
    const m = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/.exec(line);
    if (m) {
      o = +m[1]; n = +m[3];
      oLeft = m[2] == null ? 1 : +m[2];
      nLeft = m[4] == null ? 1 : +m[4];
      hunk = { header: line, lines: [] };
      f.hunks.push(hunk);
      continue;
    }
    if (line.startsWith('--- ')) { f.old = side(line.slice(4), 'a/'); f.path = f.new ?? f.old ?? f.path; continue; }
    if (line.startsWith('+++ ')) {
      f.new = side(line.slice(4), 'b/');
      if (f.new == null) f.status = 'deleted';
      f.path = f.new ?? f.old ?? f.path;
      continue;
    }
    if (line.startsWith('new file mode')) f.status = 'added';
    else if (line.startsWith('deleted file mode')) { f.status = 'deleted'; f.new = null; f.path = f.old ?? f.path; }
    else if (line.startsWith('rename to ')) { f.status = 'renamed'; f.new = unquote(line.slice(10)); f.path = f.new; }
    else if (line.startsWith('Binary files') || line.startsWith('GIT binary patch')) f.status = 'binary';
    f.meta.push(line);
  }
  return files;
}

/** Rows for side by side: removed lines paired with the added ones that replace them. */
export function splitRows(lines) {
  const rows = [];
  let dels = []; let adds = [];
  const flush = () => {
    for (let i = 0; i < Math.max(dels.length, adds.length); i++) rows.push([dels[i] || null, adds[i] || null]);
    dels = []; adds = [];
  };
  for (const l of lines) {
    if (l.t === 'del') { if (adds.length) flush(); dels.push(l); } else if (l.t === 'add') adds.push(l);
    else { flush(); rows.push([l, l]); }
  }
  flush();
  return rows;
}

// ---- a light tokenizer: strings, comments, numbers and keywords, one line at a time

const KEYWORDS = new Set(('as async await break case catch class const continue def default defer del do elif else enum '
  + 'except export extends false fi finally fn for from func function go if impl import in interface let loop match '
  + 'mod mut new nil none None null package pass pub raise return self Self static struct super switch then this throw '
  + 'trait true True False try type typeof use var void where while with yield').split(' '));
const HASH_COMMENT = /\.(py|sh|bash|zsh|rb|toml|ya?ml|conf|cfg|ini|pl|r|mk|dockerfile|nix|tf)$|(^|\/)(Makefile|Dockerfile|\.gitignore|\.env[^/]*)$/i;
const NO_TOKENS = /\.(md|markdown|txt|rst|json|lock|csv|svg|html?|xml)$/i;

/** [[class|null, text]]: the line cut into tokens; concatenated they give the line back. */
export function tokenize(line, path) {
  if (NO_TOKENS.test(path) || line.length > 400) return [[null, line]];
  const hash = HASH_COMMENT.test(path);
  const re = hash
    ? /(#.*$)|("(?:[^"\\]|\\.)*"?|'(?:[^'\\]|\\.)*'?)|(\b\d[\d_]*(?:\.\d+)?\b|\b0x[\da-f]+\b)|([A-Za-z_]\w*)/gi
    : /(\/\/.*$|\/\*.*?(?:\*\/|$))|("(?:[^"\\]|\\.)*"?|`(?:[^`\\]|\\.)*`?|'(?:[^'\\]|\\.){0,2}')|(\b\d[\d_]*(?:\.\d+)?(?:[eE][+-]?\d+)?[a-z\d]*\b|\b0x[\da-f_]+\b)|([A-Za-z_]\w*)/gi;
  const out = [];
  let at = 0;
  for (const m of line.matchAll(re)) {
    if (m.index > at) out.push([null, line.slice(at, m.index)]);
    const cls = m[1] ? 'tok-com' : m[2] ? 'tok-str' : m[3] ? 'tok-num' : KEYWORDS.has(m[4]) ? 'tok-kw' : null;
    out.push([cls, m[0]]);
    at = m.index + m[0].length;
  }
  if (at < line.length) out.push([null, line.slice(at)]);
  return out.reduce((acc, t) => {
    const last = acc[acc.length - 1];
    if (last && last[0] === null && t[0] === null) last[1] += t[1]; else acc.push(t);
    return acc;
  }, []);
}

// ---- drawing

const MARK = { add: '+', del: '-', ctx: ' ', note: '' };

function code(l, path, colour) {
  const el = h('span', { class: 'code' });
  if (!colour || l.t === 'note') { el.textContent = l.text; return el; }
  for (const [cls, text] of tokenize(l.text, path)) el.appendChild(cls ? h('span', { class: cls, text }) : document.createTextNode(text));
  return el;
}

function lineEl(l, path, colour) {
  return h('div', { class: ['dl', `dl-${l.t}`], test: 'diff-line', 'data-anchor': l.anchor, title: `comment on ${l.anchor}` },
    h('span', { class: 'ln', text: l.o ?? '' }), h('span', { class: 'ln', text: l.n ?? '' }),
    h('span', { class: 'mark', text: MARK[l.t] }), code(l, path, colour));
}

function halfEl(l, path, colour, which) {
  if (!l) return [h('span', { class: 'ln' }), h('span', { class: 'code empty' })];
  const t = l.t === 'ctx' ? 'ctx' : l.t;
  return [h('span', { class: 'ln', text: (which === 'o' ? l.o : l.n) ?? '' }),
    h('div', { class: ['half', `dl-${t}`], test: 'diff-line', 'data-anchor': l.anchor, title: `comment on ${l.anchor}` },
      code(l, path, colour))];
}

/**
 * The diff as elements, unified or (`split`) side by side. Colouring is left out of very
 * large diffs, which stay readable and quick.
 */
export function renderDiff(files, { split }) {
  const total = files.reduce((a, f) => a + f.hunks.reduce((b, hk) => b + hk.lines.length, 0), 0);
  const colour = total < 8000;
  return files.map((f) => {
    const head = h('summary', { class: 'file-head', 'data-anchor': f.path, test: 'diff-file' },
      h('span', { class: `fstat fstat-${f.status}`, text: f.status }),
      h('span', { class: 'fpath', text: f.old && f.new && f.old !== f.new ? `${f.old} → ${f.new}` : f.path }),
      h('span', { class: 'fcount', text: `+${f.add} −${f.del}` }));
    const body = h('div', { class: split ? 'hunks split' : 'hunks' });
    if (!f.hunks.length) body.appendChild(h('div', { class: 'dmeta', text: f.meta.filter((m) => !m.startsWith('index ')).join('\n') || 'no textual change' }));
    for (const hk of f.hunks) {
      body.appendChild(h('div', { class: 'dl dl-hunk', test: 'diff-line', 'data-anchor': f.path, text: hk.header }));
      if (split) {
        // A row is a box of its own (display: contents) so a comment can go after it whole.
        for (const [a, b] of splitRows(hk.lines)) {
          body.appendChild(h('div', { class: 'srow' }, ...halfEl(a, f.path, colour, 'o'), ...halfEl(b, f.path, colour, 'n')));
        }
      } else {
        for (const l of hk.lines) body.appendChild(lineEl(l, f.path, colour));
      }
    }
    return h('details', { class: 'dfile', open: true }, head, body);
  });
}
