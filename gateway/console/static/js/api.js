// The REST API with the user's token. The token lives in sessionStorage:
// gone when the tab closes, never in a cookie, a URL or localStorage.

const TOKEN = 'memgrid.token';
const ADMIN = 'memgrid.adminToken';
export const ROLES = ['read', 'write', 'review', 'admin', 'operator'];

/** The gateway's root: the console is served at <root>/ui/. */
export const ROOT = new URL('../', new URL('.', window.location.href.split('#')[0]));

export class ApiError extends Error {
  constructor(status, message, reason = '', details = null) {
    super(message);
    this.status = status;
    this.reason = reason;
    this.details = details;
  }

  /** What to tell the user: the API's own message, with a hint for a refusal. */
  get explained() {
    if (this.status === 401) return `Signed-in token refused: ${this.message}. Sign in again.`;
    if (this.status === 403) return `Not allowed (403): ${this.message}.`;
    if (this.status === 0) return `The gateway could not be reached: ${this.message}.`;
    return `${this.message} (${this.status}${this.reason ? ` ${this.reason}` : ''}).`;
  }
}

export const session = {
  get token() { return sessionStorage.getItem(TOKEN); },
  get adminToken() { return sessionStorage.getItem(ADMIN); },
  set(token, adminToken) {
    sessionStorage.setItem(TOKEN, token);
    if (adminToken) sessionStorage.setItem(ADMIN, adminToken);
    else sessionStorage.removeItem(ADMIN);
  },
  clear() {
    sessionStorage.removeItem(TOKEN);
    sessionStorage.removeItem(ADMIN);
  },
};

/** Whether `role` includes the rights of `needed`. */
export function roleAllows(role, needed) {
  return ROLES.indexOf(role) >= ROLES.indexOf(needed);
}

export function authHeaders(extra = {}) {
  const headers = { ...extra };
  if (session.token) headers.Authorization = `Bearer ${session.token}`;
  if (session.adminToken) headers['X-Admin-Token'] = session.adminToken;
  return headers;
}

/** The URL of an API path with query parameters (arrays repeat; empty values are left out). */
export function apiUrl(path, query = {}) {
  const url = new URL(path.replace(/^\//, ''), ROOT);
  for (const [name, value] of Object.entries(query)) {
    for (const v of Array.isArray(value) ? value : [value]) {
      if (v !== undefined && v !== null && v !== '') url.searchParams.append(name, String(v));
    }
  }
  return url;
}

/** The ApiError an error answer stands for (the envelope's message and reason). */
export async function errorOf(response) {
  let body = null;
  try { body = await response.json(); } catch { /* not JSON: the status says it */ }
  return new ApiError(response.status, body?.message || response.statusText || 'request failed', body?.reason || '', body?.details || null);
}

/** One call: the answer's JSON (or the Response itself with raw), an ApiError when it is not a 2xx. */
export async function call(method, path, { query, body, raw = false } = {}) {
  const init = { method, headers: authHeaders({ Accept: 'application/json' }), cache: 'no-store' };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(apiUrl(path, query), init);
  } catch (error) {
    throw new ApiError(0, error.message || 'network error');
  }
  if (!response.ok) throw await errorOf(response);
  return raw ? response : response.json();
}

export const api = {
  get: (path, query) => call('GET', path, { query }),
  post: (path, body, query) => call('POST', path, { body, query }),
  patch: (path, body) => call('PATCH', path, { body }),
  del: (path, query) => call('DELETE', path, { query }),
  raw: (method, path, options) => call(method, path, { ...options, raw: true }),
};
