// A memory's page: every field, its supersession chain both ways, its audit
// history, its neighbourhood as a graph, and the actions a writer may take.

import { api, ApiError } from './api.js';
import { badge, fields, h, memoryLink, put, section, shortId, snippet, when } from './dom.js';
import { drawGraph } from './graph.js';

const SUPERSEDE = new Set(['INVALIDATED_BY', 'EVOLVED_INTO']);
const MAX_CHAIN = 20;
const SHOWN_FIRST = ['content', 'type', 'trust_state', 'state', 'replaced_by', 'review_rule', 'tags', 'importance', 'confidence',
  'timestamp', 't_valid', 't_invalid', 'updated_at', 'recorded_at', 'superseded_at', 'archived', 'archived_at', 'version', 'id', 'tenant'];
const HIDDEN = new Set(['embedding', 'relations', 'tag_prefixes']);

const enc = encodeURIComponent;
const fetchMemory = async (id) => (await api.get(`/memory/${enc(id)}`)).memory;

function value(name, v) {
  if (v === null || v === undefined || v === '') return h('span', { class: 'muted' }, '—');
  if (name === 'replaced_by') return memoryLink(v, v);
  if (name === 'trust_state' || name === 'state') return badge(v);
  if (/(^t_|_at$|^timestamp$|^last_accessed$)/.test(name)) return when(v);
  if (name === 'content') return h('p', { class: 'content' }, v);
  if (Array.isArray(v)) return v.length ? v.join(', ') : h('span', { class: 'muted' }, 'none');
  if (typeof v === 'object') return h('pre', { class: 'json' }, JSON.stringify(v, null, 2));
  return String(v);
}

function allFields(m) {
  const names = [...SHOWN_FIRST.filter((n) => n in m), ...Object.keys(m).filter((n) => !SHOWN_FIRST.includes(n) && !HIDDEN.has(n)).sort()];
  return fields(names.map((n) => [n, value(n, m[n])]));
}

/** The ids one supersede step away: newer (this one's outgoing edges) or older (incoming). */
function steps(m, direction) {
  return (m.relations || []).filter((r) => SUPERSEDE.has(r.type) && r.direction === direction);
}

/** The chain through `m`, oldest first: [{memory, relation}] where relation links it to the next one. */
async function chain(m) {
  const older = [];
  const newer = [];
  const seen = new Set([m.id]);
  let at = m;
  while (older.length < MAX_CHAIN) {
    const back = steps(at, 'incoming').find((r) => !seen.has(r.memory_id));
    if (!back) break;
    seen.add(back.memory_id);
    at = await fetchMemory(back.memory_id);
    older.unshift({ memory: at, relation: back });
  }
  at = m;
  while (newer.length < MAX_CHAIN) {
    const next = steps(at, 'outgoing').find((r) => !seen.has(r.memory_id));
    if (!next) break;
    seen.add(next.memory_id);
    newer.push({ memory: await fetchMemory(next.memory_id), relation: next });
    at = newer[newer.length - 1].memory;
  }
  return { older, newer };
}

function chainView(m, { older, newer }) {
  if (!older.length && !newer.length) return h('p', { class: 'muted' }, 'Not part of a supersession chain: nothing replaced it and it replaced nothing.');
  const label = (rel) => `${rel.type === 'EVOLVED_INTO' ? 'evolved into' : 'invalidated by'}${rel.properties?.reason ? ` (“${rel.properties.reason}”)` : ''}`;
  const items = [
    ...older.map(({ memory, relation }) => ({ memory, after: label(relation) })),
    { memory: m, after: newer[0] ? label(newer[0].relation) : '' },
    ...newer.map(({ memory }, i) => ({ memory, after: newer[i + 1] ? label(newer[i + 1].relation) : '' })),
  ];
  return h('ol', { class: 'chain', 'aria-label': 'Supersession chain, oldest first' }, items.map(({ memory, after }) => h('li', {},
    memory.id === m.id
      ? h('strong', { 'aria-current': 'true' }, `this memory: “${snippet(memory.content, 90)}”`)
      : memoryLink(memory.id, `“${snippet(memory.content, 90)}”`),
    ' ', badge(memory.trust_state),
    after ? h('span', { class: 'muted step' }, ` ${after} ↓`) : null)));
}

function diffText(diff) {
  const names = Object.keys(diff || {});
  return names.length ? names.join(', ') : '';
}

function detailText(detail) {
  return Object.entries(detail || {}).map(([k, v]) => `${k}: ${v !== null && typeof v === 'object' ? JSON.stringify(v) : v}`).join('; ');
}

function historyView(entries) {
  if (!entries.length) return h('p', { class: 'muted' }, 'No audit entries (the audit log may be off).');
  return h('div', { class: 'scroll' }, h('table', { class: 'history' },
    h('caption', { class: 'sr-only' }, 'Audit history, oldest first'),
    h('thead', {}, h('tr', {}, ['#', 'when', 'actor', 'kind', 'version', 'changed', 'detail'].map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, entries.map((e) => h('tr', {},
      h('td', {}, e.seq), h('td', {}, when(e.at)), h('td', {}, e.actor), h('td', {}, e.kind), h('td', {}, e.version),
      h('td', {}, diffText(e.diff)),
      h('td', { class: 'detail' }, detailText(e.detail)))))));
}

/** A button that runs `action`, disabled with a visible reason when the role may not. */
function actionButton(ctx, { id, label, needed, what, onclick, danger = false }) {
  const reason = ctx.why(needed, what);
  return h('span', { class: 'action' },
    h('button', { type: 'button', id, class: danger ? 'danger' : '', disabled: Boolean(reason), 'aria-describedby': reason ? `${id}-why` : null, onclick }, label),
    reason ? h('span', { id: `${id}-why`, class: 'why' }, reason) : null);
}

function runAction(ctx, button, work) {
  return async (event) => {
    event?.preventDefault();
    button.disabled = true;
    try { await work(); } catch (error) { ctx.fail(error); } finally { if (button.isConnected) button.disabled = false; }
  };
}

function editForm(ctx, m, reload) {
  const form = h('form', { class: 'edit', hidden: true, 'aria-label': 'Edit memory' },
    h('label', { for: 'edit-content' }, 'Content'), h('textarea', { id: 'edit-content', rows: 4 }),
    h('label', { for: 'edit-tags' }, 'Tags (comma-separated)'), h('input', { id: 'edit-tags' }),
    h('label', { for: 'edit-importance' }, 'Importance (0–1)'), h('input', { id: 'edit-importance', type: 'number', min: 0, max: 1, step: 0.05 }),
    h('div', { class: 'row' }, h('button', { type: 'submit', class: 'primary' }, 'Save changes'), h('button', { type: 'button', class: 'quiet', onclick: () => { form.hidden = true; } }, 'Cancel')));
  form.querySelector('#edit-content').value = m.content;
  form.querySelector('#edit-tags').value = (m.tags || []).join(', ');
  form.querySelector('#edit-importance').value = m.importance;
  const save = form.querySelector('button[type=submit]');
  form.addEventListener('submit', runAction(ctx, save, async () => {
    await api.patch(`/memory/${enc(m.id)}`, {
      content: form.querySelector('#edit-content').value,
      tags: form.querySelector('#edit-tags').value.split(',').map((t) => t.trim()).filter(Boolean),
      importance: Number(form.querySelector('#edit-importance').value),
    });
    ctx.notify('Saved.', 'ok');
    await reload();
  }));
  return form;
}

function supersedeForm(ctx, m) {
  const form = h('form', { class: 'edit', hidden: true, 'aria-label': 'Supersede memory' },
    h('label', { for: 'sup-content' }, 'Replacement content'), h('textarea', { id: 'sup-content', rows: 4, required: true }),
    h('label', { for: 'sup-relation' }, 'Why it is replaced'),
    h('select', { id: 'sup-relation' },
      h('option', { value: 'INVALIDATED_BY' }, 'it was wrong (invalidated by; leaves a tombstone)'),
      h('option', { value: 'EVOLVED_INTO' }, 'it changed (evolved into)')),
    h('label', { for: 'sup-reason' }, 'Reason for superseding'), h('input', { id: 'sup-reason' }),
    h('div', { class: 'row' }, h('button', { type: 'submit', class: 'primary' }, 'Supersede'), h('button', { type: 'button', class: 'quiet', onclick: () => { form.hidden = true; } }, 'Cancel')));
  form.querySelector('#sup-content').value = m.content;
  const send = form.querySelector('button[type=submit]');
  form.addEventListener('submit', runAction(ctx, send, async () => {
    const answer = await api.post('/memory', {
      content: form.querySelector('#sup-content').value,
      type: m.type,
      tags: m.tags,
      importance: m.importance,
      supersedes_memory_id: m.id,
      supersede_relation: form.querySelector('#sup-relation').value,
      supersede_reason: form.querySelector('#sup-reason').value,
    });
    ctx.go(`#/memory/${enc(answer.memory_id)}`, 'Superseded: this is the replacement.');
  }));
  return form;
}

function deleteForm(ctx, m, reload) {
  const form = h('form', { class: 'edit', hidden: true, 'aria-label': 'Delete memory' },
    h('p', {}, 'Deleting removes the memory, its edges and its vector; its audit history stays.'),
    h('label', { for: 'del-reason' }, 'Reason for deleting'),
    h('select', { id: 'del-reason' },
      h('option', { value: 'rejected' }, 'rejected: wrong, keep it out (leaves a tombstone)'),
      h('option', { value: 'obsolete' }, 'no longer needed (no tombstone)')),
    h('div', { class: 'row' }, h('button', { type: 'submit', class: 'danger' }, 'Delete for good'), h('button', { type: 'button', class: 'quiet', onclick: () => { form.hidden = true; } }, 'Cancel')));
  const send = form.querySelector('button[type=submit]');
  form.addEventListener('submit', runAction(ctx, send, async () => {
    const rejected = form.querySelector('#del-reason').value === 'rejected';
    const answer = await api.del(`/memory/${enc(m.id)}`, rejected ? { reason: 'rejected' } : {});
    ctx.notify(answer.tombstone_id ? `Deleted; tombstone ${answer.tombstone_id} keeps the content out.` : 'Deleted.', 'ok');
    await reload({ deleted: true });
  }));
  return form;
}

function actions(ctx, m, reload) {
  const edit = editForm(ctx, m, reload);
  const supersede = supersedeForm(ctx, m);
  const remove = deleteForm(ctx, m, reload);
  const open = (form) => () => {
    for (const f of [edit, supersede, remove]) f.hidden = f !== form;
    form.querySelector('textarea, select, input')?.focus();
  };
  const archive = actionButton(ctx, {
    id: 'act-archive', label: m.archived ? 'Restore from archive' : 'Archive', needed: 'write', what: 'Archiving',
    onclick: async (event) => runAction(ctx, event.currentTarget, async () => {
      await api.patch(`/memory/${enc(m.id)}`, { archived: !m.archived });
      ctx.notify(m.archived ? 'Restored from the archive.' : 'Archived: withheld from recall, kept for history.', 'ok');
      await reload();
    })(),
  });
  return h('div', {},
    h('div', { class: 'actions' },
      actionButton(ctx, { id: 'act-edit', label: 'Edit', needed: 'write', what: 'Editing', onclick: open(edit) }),
      actionButton(ctx, { id: 'act-supersede', label: 'Supersede', needed: 'write', what: 'Superseding', onclick: open(supersede) }),
      archive,
      actionButton(ctx, { id: 'act-delete', label: 'Delete…', needed: 'write', what: 'Deleting', onclick: open(remove), danger: true })),
    edit, supersede, remove);
}

export async function render(main, ctx, [id]) {
  if (!id) { ctx.go('#/search'); return; }
  const title = h('h1', { tabindex: -1 }, `Memory ${shortId(id)}`);
  main.append(title, h('p', { class: 'muted' }, 'Loading…'));
  const reload = async ({ deleted = false } = {}) => {
    let m = null;
    try {
      m = await fetchMemory(id);
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) throw error;
    }
    const [history, chainParts, neighbours] = await Promise.all([
      api.get(`/memory/${enc(id)}/history`).then((a) => a.entries).catch(() => []),
      m ? chain(m) : { older: [], newer: [] },
      m ? api.get(`/graph/neighbors/${enc(id)}`, { depth: 2, limit: 40, state_mode: 'history' }).catch(() => null) : null,
    ]);
    if (!ctx.alive()) return;
    if (!m) {
      put(main, title,
        h('p', { class: 'panel' }, deleted ? 'This memory is deleted. Its audit history stays:' : 'No memory with this id in your tenant (deleted, or never stored). Its audit history, if any:'),
        section('Audit history', historyView(history)));
      return;
    }
    const banner = m.state && m.state !== 'current'
      ? h('p', { class: 'banner' }, `This memory is ${m.state.replace('_', ' ')}`, m.replaced_by ? [': the current one is ', memoryLink(m.replaced_by, 'its head')] : '', '.')
      : null;
    put(main,
      title,
      banner,
      h('div', { class: 'columns' },
        h('div', {},
          section('Fields', allFields(m)),
          section('Actions', actions(ctx, m, reload))),
        h('div', {},
          section('Supersession chain', chainView(m, chainParts)),
          section('Neighbourhood', neighbours ? drawGraph(neighbours, (to) => ctx.go(`#/memory/${enc(to)}`)) : h('p', { class: 'muted' }, 'No graph view.')))),
      section('Audit history', historyView(history)),
    );
  };
  await reload();
}
