// The login page's script (served by /login, which sets the HttpOnly cookie): it keeps the
// page key the server put in a <meta> in this origin's localStorage — every API request
// sends it as X-Octl-Key, which no other origin (an agent's page on another port of this
// host, say) can read or set — then opens the UI, replacing the one-time link in history.

const meta = document.querySelector('meta[name="octl-key"]');
const key = meta ? meta.getAttribute('content') : '';
if (key && /^[0-9a-f]{16,128}$/i.test(key)) {
  try {
    localStorage.setItem('octl.key', key);
    location.replace('/');
  } catch {
    document.body.textContent = 'This browser does not let the page keep its key (localStorage is off): allow site data for it and open a new login link.';
  }
} else {
  document.body.textContent = 'The login page carries no key: open a new link from `orchestratectl ui`.';
}
