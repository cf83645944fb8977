// The login page's only script: the session's page key (see octld/src/ui/auth.rs) goes from
// the page into this origin's storage, then the UI opens. The key never appears in a URL.
const meta = document.querySelector('meta[name="octl-key"]');
if (meta) {
  localStorage.setItem('octl-key', meta.getAttribute('content'));
  meta.remove();
}
location.replace('/');
