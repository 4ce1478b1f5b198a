// The console's shell: sign-in, the page navigation (a hash router) and the
// notice line. Each page is a module whose render(main, ctx) fills <main>.

import { api, ApiError, roleAllows, session } from './api.js';
import { h } from './dom.js';
import * as memory from './memory.js';
import * as overview from './overview.js';
import * as review from './review.js';
import * as search from './search.js';

const PAGES = { search, memory, review, overview };
const main = document.getElementById('main');
const nav = document.getElementById('nav');
const who = document.getElementById('who');
const signOut = document.getElementById('sign-out');
const noticeLine = document.getElementById('notice');

let me = null; // GET /whoami: {tenant, role, token_id, operator}
let generation = 0; // bumps on every page change: stale answers are dropped
let cleanup = null; // the page's own teardown (the live stream)
let pending = null; // a notice to show once the next page is up: [message, kind]

/** Shows a message in the notice line (kind: info, ok or error). */
export function notify(message, kind = 'info') {
  noticeLine.className = `notice notice-${kind}`;
  noticeLine.replaceChildren(
    h('span', {}, message),
    h('button', { type: 'button', class: 'quiet', 'aria-label': 'Dismiss message', onclick: clearNotice }, '×'),
  );
}

function clearNotice() {
  noticeLine.className = 'notice';
  noticeLine.replaceChildren();
}

/** An error as the notice line says it; a 401 signs out. */
function fail(error) {
  if (error instanceof ApiError) {
    if (error.status === 401) {
      session.clear();
      me = null;
      route();
    }
    notify(error.explained, 'error');
  } else {
    notify(`Something went wrong: ${error.message}`, 'error');
    console.error(error);
  }
}

function context() {
  const mine = ++generation;
  return {
    me,
    alive: () => mine === generation,
    can: (needed) => Boolean(me) && roleAllows(me.role, needed),
    /** Why a button is off for this token, or '' when it may act. */
    why: (needed, what) => (me && roleAllows(me.role, needed) ? '' : `${what} needs the ${needed} role; this token's role is ${me?.role ?? 'unknown'}.`),
    notify,
    fail,
    /** Moves to another page, with a notice shown once it is up. */
    go: (hash, message, kind = 'ok') => { pending = message ? [message, kind] : null; window.location.hash = hash; },
    onLeave: (fn) => { cleanup = fn; },
  };
}

function renderSignIn(message) {
  nav.hidden = true;
  signOut.hidden = true;
  who.textContent = '';
  const token = h('input', { id: 'token', name: 'token', type: 'password', autocomplete: 'off', required: true, 'aria-describedby': 'token-help' });
  const admin = h('input', { id: 'admin-token', name: 'admin-token', type: 'password', autocomplete: 'off', 'aria-describedby': 'admin-help' });
  const form = h('form', { class: 'panel signin', 'aria-labelledby': 'signin-title' },
    h('h1', { id: 'signin-title' }, 'Sign in'),
    h('p', {}, 'The console calls the memgrid API with your token. It is kept in this tab only (session storage) and is gone when the tab closes.'),
    h('label', { for: 'token' }, 'API token'), token,
    h('p', { id: 'token-help', class: 'help' }, 'A token from the tokens file (its role decides what you may do here), or the single AUTOMEM_API_TOKEN.'),
    h('details', {},
      h('summary', {}, 'Single-token deployment: admin token'),
      h('label', { for: 'admin-token' }, 'Admin token (optional)'), admin,
      h('p', { id: 'admin-help', class: 'help' }, 'ADMIN_API_TOKEN, sent as X-Admin-Token: what the single token needs to review and to manage backups.')),
    h('button', { type: 'submit', class: 'primary' }, 'Sign in'),
    message ? h('p', { class: 'error', role: 'alert' }, message) : null);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    session.set(token.value.trim(), admin.value.trim());
    try {
      me = await api.get('/whoami');
    } catch (error) {
      session.clear();
      renderSignIn(error instanceof ApiError ? error.explained : error.message);
      return;
    }
    clearNotice();
    if (!window.location.hash.startsWith('#/')) window.location.hash = '#/search';
    else route();
  });
  main.replaceChildren(form);
  token.focus();
}

function showCaller() {
  nav.hidden = false;
  signOut.hidden = false;
  who.textContent = `tenant ${me.tenant} · role ${me.role}`;
}

async function route() {
  if (cleanup) { cleanup(); cleanup = null; }
  if (!session.token) { generation++; renderSignIn(); return; }
  if (!me) {
    try { me = await api.get('/whoami'); } catch (error) {
      session.clear();
      renderSignIn(error instanceof ApiError ? error.explained : error.message);
      return;
    }
  }
  showCaller();
  const [name, ...rest] = window.location.hash.replace(/^#\/?/, '').split('/');
  const page = PAGES[name] ? name : 'search';
  for (const link of nav.querySelectorAll('a')) {
    if (link.getAttribute('href') === `#/${page}`) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  const ctx = context();
  main.replaceChildren();
  try {
    await PAGES[page].render(main, ctx, rest.map(decodeURIComponent));
  } catch (error) {
    if (ctx.alive()) fail(error);
  }
}

signOut.addEventListener('click', () => {
  session.clear();
  me = null;
  clearNotice();
  window.location.hash = '';
  route();
});
window.addEventListener('hashchange', () => {
  clearNotice();
  route().then(() => {
    // The page's heading takes the focus, unless the page put it somewhere (search: its query box).
    if (!main.contains(document.activeElement) || document.activeElement === main) main.querySelector('h1')?.focus();
    if (pending) { notify(...pending); pending = null; }
  });
});
window.addEventListener('unhandledrejection', (event) => fail(event.reason));
route();
