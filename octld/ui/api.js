// octld over HTTP: the session, JSON-RPC calls and the change feed.
// A session is two secrets: the HttpOnly cookie (this code never sees it, the browser sends
// it) and the page key login.js kept in this origin's localStorage, sent as X-Octl-Key
// (also the CSRF token; an `csrf` the session names is sent too).

let csrf = '';
let nextId = 1;

function pageKey() {
  try { return localStorage.getItem('octl.key') || ''; } catch { return ''; }
}

function headers(extra = {}) {
  const h = { ...extra };
  const key = pageKey();
  if (key) h['X-Octl-Key'] = key;
  if (csrf) h['X-CSRF-Token'] = csrf;
  return h;
}

/** An error octld answered (or the reason no answer came): its message is shown whole. */
export class RpcError extends Error {
  constructor(message, kind = 'internal', hint = null) {
    super(message);
    this.kind = kind;
    this.hint = hint;
  }
}

/** `GET /api/session`: the CSRF token for writes, and which daemon answers. */
export async function session() {
  let r;
  try {
    r = await fetch('/api/session', { credentials: 'same-origin', cache: 'no-store', headers: headers() });
  } catch (e) {
    throw new RpcError(`octld is not answering (${e.message})`, 'daemon_unreachable');
  }
  if (r.status === 401 || r.status === 403) {
    throw new RpcError('This browser is not logged in: open the link `orchestratectl ui` prints.', 'unauthorized');
  }
  if (!r.ok) throw new RpcError(`octld answered HTTP ${r.status} for /api/session`, 'internal');
  const s = await r.json();
  csrf = String(s.csrf || '');
  return s;
}

/** One JSON-RPC call; the result, or an RpcError with the daemon's message, kind and hint. */
export async function rpc(method, params = {}, retried = false) {
  let r;
  try {
    r = await fetch('/api/rpc', {
      method: 'POST',
      credentials: 'same-origin',
      cache: 'no-store',
      headers: headers({ 'Content-Type': 'application/json' }),
      body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }),
    });
  } catch (e) {
    throw new RpcError(`octld is not answering (${e.message})`, 'daemon_unreachable');
  }
  // A restarted daemon may hand out a new CSRF token: fetch it once and try again.
  if ((r.status === 401 || r.status === 403) && !retried) {
    await session();
    return rpc(method, params, true);
  }
  const raw = await r.text().catch(() => '');
  let body;
  try {
    body = JSON.parse(raw);
  } catch {
    // A refusal before JSON-RPC (a session, an origin, a size): the server's words, as text.
    throw new RpcError(raw.trim() || `octld answered HTTP ${r.status} to ${method}`, r.status === 401 ? 'unauthorized' : 'http');
  }
  if (body && body.error) {
    const d = body.error.data || {};
    throw new RpcError(String(body.error.message ?? 'error'), String(d.kind || 'internal'), d.hint ? String(d.hint) : null);
  }
  if (!r.ok) throw new RpcError(`octld answered HTTP ${r.status} to ${method}`);
  return body.result;
}

/**
 * Follows the change feed. EventSource reconnects by itself and sends Last-Event-ID, so no
 * event is lost across a blip; if the server refuses the stream (a cursor from an index that
 * was rebuilt), the browser gives up, and we open a fresh one from now (the caller reloads
 * everything on each `hello`, so nothing is missed either).
 */
export function follow({ onHello, onEvent, onDown }) {
  let es = null;
  const open = () => {
    if (stopped) return;
    // EventSource cannot send headers: the page key goes in the query.
    const key = pageKey();
    es = new EventSource(`/api/events?since=now${key ? `&key=${encodeURIComponent(key)}` : ''}`, { withCredentials: true });
    es.addEventListener('hello', (e) => {
      let hello = {};
      try { hello = JSON.parse(e.data); } catch { /* a hello we cannot read still says it is back */ }
      onHello(hello);
    });
    es.onmessage = (e) => {
      let item;
      try { item = JSON.parse(e.data); } catch { return; }
      if (item && item.event) onEvent(item.event);
    };
    es.onerror = () => {
      const closed = es.readyState === EventSource.CLOSED;
      onDown(closed);
      if (closed && !stopped) setTimeout(open, 3000);
    };
  };
  let stopped = false;
  open();
  return () => { stopped = true; es.close(); };
}
