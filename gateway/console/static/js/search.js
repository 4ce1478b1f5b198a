// Search: GET /recall with its main parameters; each result with its score
// components, match type, trust state and validity window, and a superseded
// memory with the head that replaced it.

import { api } from './api.js';
import { badge, h, memoryLink, snippet, when } from './dom.js';

export const TRUST_STATES = ['active', 'verified', 'disputed', 'superseded', 'deprecated', 'pending_review', 'rejected'];
const SUPERSEDE = new Set(['INVALIDATED_BY', 'EVOLVED_INTO']);
let last = null; // the last search's parameters, kept while the tab lives

function input(id, label, props = {}, help = '') {
  return h('div', { class: 'field' },
    h('label', { for: id }, label),
    h('input', { id, name: id, ...props, ...(help ? { 'aria-describedby': `${id}-help` } : {}) }),
    help ? h('p', { id: `${id}-help`, class: 'help' }, help) : null);
}

function form(ctx, onSearch) {
  const states = h('fieldset', { class: 'states' },
    h('legend', {}, 'Trust states (none ticked: the default, what recall shows)'),
    TRUST_STATES.map((state) => h('label', { class: 'check' },
      h('input', { type: 'checkbox', name: 'trust_states', value: state }), ` ${state}`)));
  const el = h('form', { class: 'panel search', role: 'search', 'aria-label': 'Recall memories' },
    h('div', { class: 'row' },
      input('q', 'Query', { type: 'search', placeholder: 'what do you want to recall?', autocomplete: 'off' }),
      h('button', { type: 'submit', class: 'primary' }, 'Search')),
    h('details', { class: 'filters', open: window.matchMedia('(min-width: 761px)').matches },
      h('summary', {}, 'Filters: tags, time, state mode, limit, trust states'),
    h('div', { class: 'grid' },
      input('tags', 'Tags', { placeholder: 'project:x, decision' }, 'Comma-separated; a prefix matches its children.'),
      input('time_query', 'Time', { placeholder: 'last 7 days' }, 'In words, e.g. "yesterday", "last month".'),
      input('start', 'From', { type: 'date' }),
      input('end', 'To', { type: 'date' }),
      h('div', { class: 'field' },
        h('label', { for: 'state_mode' }, 'State mode'),
        h('select', { id: 'state_mode', name: 'state_mode', 'aria-describedby': 'state_mode-help' },
          h('option', { value: 'current' }, 'current'),
          h('option', { value: 'history' }, 'history')),
        h('p', { id: 'state_mode-help', class: 'help' }, 'history adds superseded and expired memories.')),
      input('limit', 'Limit', { type: 'number', min: 1, max: 100, value: 10 })),
    states));
  if (last) restore(el, last);
  el.addEventListener('submit', (event) => {
    event.preventDefault();
    const data = new FormData(el);
    last = {
      query: data.get('q').trim(),
      tags: data.get('tags').split(',').map((t) => t.trim()).filter(Boolean),
      time_query: data.get('time_query').trim(),
      start: data.get('start'),
      end: data.get('end'),
      state_mode: data.get('state_mode'),
      trust_states: data.getAll('trust_states'),
      limit: data.get('limit') || 10,
    };
    onSearch(last);
  });
  return el;
}

function restore(el, p) {
  el.querySelector('#q').value = p.query;
  el.querySelector('#tags').value = p.tags.join(', ');
  el.querySelector('#time_query').value = p.time_query;
  el.querySelector('#start').value = p.start;
  el.querySelector('#end').value = p.end;
  el.querySelector('#state_mode').value = p.state_mode;
  el.querySelector('#limit').value = p.limit;
  for (const box of el.querySelectorAll('input[name=trust_states]')) box.checked = p.trust_states.includes(box.value);
}

function components(scores) {
  const shown = Object.entries(scores || {}).filter(([, v]) => v);
  if (!shown.length) return null;
  return h('ul', { class: 'scores', 'aria-label': 'Score components' },
    shown.map(([name, value]) => h('li', {}, h('span', { class: 'muted' }, name), ` ${Number(value).toFixed(2)}`)));
}

function result(item, heads) {
  const m = item.memory;
  const replacedBy = (item.relations || []).find((r) => SUPERSEDE.has(r.type) && r.direction === 'outgoing');
  const head = replacedBy ? heads.get(replacedBy.memory_id) : null;
  return h('li', { class: 'result' },
    h('article', { 'aria-label': snippet(m.content, 60) },
      h('p', { class: 'content' }, snippet(m.content, 400)),
      h('div', { class: 'meta' },
        badge(item.trust_state || m.trust_state),
        h('span', {}, m.type),
        h('span', { title: 'final score' }, `score ${Number(item.final_score ?? item.score ?? 0).toFixed(3)}`),
        h('span', {}, `match ${item.match_type || '—'}`),
        h('span', {}, 'valid ', when(m.t_valid), ' → ', m.t_invalid ? when(m.t_invalid) : 'open'),
        (m.tags || []).length ? h('span', {}, `tags ${m.tags.join(', ')}`) : null),
      components(item.score_components),
      replacedBy ? h('p', { class: 'replaced' },
        `Superseded (${replacedBy.type.toLowerCase().replace('_', ' ')}) by `,
        memoryLink(replacedBy.memory_id, head ? `“${snippet(head.content, 100)}”` : replacedBy.memory_id)) : null,
      item.state_replaces ? h('p', { class: 'replaced' }, 'Stands in for the superseded ', memoryLink(item.state_replaces)) : null,
      h('a', { class: 'open', href: `#/memory/${encodeURIComponent(m.id)}` }, 'Open memory')));
}

/** Up/Down arrows move between the results' "Open memory" links. */
function arrowKeys(list) {
  list.addEventListener('keydown', (event) => {
    if (event.key !== 'ArrowDown' && event.key !== 'ArrowUp') return;
    const links = [...list.querySelectorAll('a.open')];
    const at = links.indexOf(document.activeElement);
    if (at < 0) return;
    event.preventDefault();
    links[Math.max(0, Math.min(links.length - 1, at + (event.key === 'ArrowDown' ? 1 : -1)))].focus();
  });
}

async function run(ctx, p, out) {
  out.replaceChildren(h('p', { class: 'muted' }, 'Searching…'));
  const query = { limit: p.limit, state_mode: p.state_mode, tags: p.tags, time_query: p.time_query, start: p.start, end: p.end };
  if (p.query) query.query = p.query;
  if (p.trust_states.length) query.trust_states = p.trust_states.join(',');
  const answer = await api.get('/recall', query);
  if (!ctx.alive()) return;
  // A superseded result names its head by id: fetch the heads not in the page.
  const byId = new Map(answer.results.map((r) => [r.memory.id, r.memory]));
  const missing = new Set();
  for (const r of answer.results) {
    for (const rel of r.relations || []) {
      if (SUPERSEDE.has(rel.type) && rel.direction === 'outgoing' && !byId.has(rel.memory_id)) missing.add(rel.memory_id);
    }
  }
  await Promise.all([...missing].map(async (id) => {
    try { byId.set(id, (await api.get(`/memory/${encodeURIComponent(id)}`)).memory); } catch { /* shown by id */ }
  }));
  if (!ctx.alive()) return;
  const list = h('ol', { class: 'results', 'aria-label': 'Results' }, answer.results.map((r) => result(r, byId)));
  arrowKeys(list);
  out.replaceChildren(
    h('h2', { id: 'results-title' }, `${answer.count} result${answer.count === 1 ? '' : 's'}`,
      h('span', { class: 'muted' }, ` · ${answer.state_mode} · ${Math.round(answer.query_time_ms)} ms`)),
    answer.count ? list : h('p', {}, 'Nothing matched. Try fewer words, another state mode, or ticking more trust states.'),
  );
}

export async function render(main, ctx) {
  const out = h('div', { id: 'results', 'aria-live': 'polite' });
  const search = (p) => run(ctx, p, out).catch((error) => { if (ctx.alive()) { out.replaceChildren(); ctx.fail(error); } });
  main.append(
    h('h1', { tabindex: -1 }, 'Search'),
    form(ctx, search),
    out,
  );
  main.querySelector('#q').focus();
  await search(last || { query: '', tags: [], time_query: '', start: '', end: '', state_mode: 'current', trust_states: [], limit: 10 });
}
