// Overview: counts by type, validity and trust state, the enrichment
// backlog, consolidation's runs, recent events live from /stream, and for a
// tenant's admin its backups (create, download, restore with a confirmation).

import { api, ApiError } from './api.js';
import { add, fields, h, memoryLink, section, when } from './dom.js';
import { openStream } from './stream.js';

const MAX_EVENTS = 50;
const QUIET = new Set(['ready']);

function counts(title, entries) {
  const rows = entries.filter(([, n]) => n !== undefined);
  return h('div', { class: 'counts' },
    h('h3', {}, title),
    rows.length
      ? h('table', {}, h('tbody', {}, rows.map(([name, n]) => h('tr', {}, h('th', { scope: 'row' }, name), h('td', { class: 'num' }, String(n))))))
      : h('p', { class: 'muted' }, 'none'));
}

function memoryCounts(analytics) {
  return h('div', { class: 'count-grid' },
    counts('By type', Object.entries(analytics.memory_types || {}).map(([t, f]) => [t, f.count])),
    counts('By trust state', Object.entries(analytics.trust_states || {})),
    counts('By validity', Object.entries(analytics.states || {})));
}

function enrichment(status) {
  const embedding = status.stats?.embedding || {};
  return fields([
    ['service', status.status],
    ['waiting for enrichment', String(status.pending)],
    ['in flight', String(status.inflight)],
    ['waiting for a vector', String(embedding.pending ?? '—')],
    ['processed', String(status.processed)],
    ['failed', String(status.failed)],
  ]);
}

function consolidation(ctx, status, refresh) {
  const runs = status.history || [];
  const reason = ctx.why('write', 'Running consolidation');
  const run = h('button', { type: 'button', id: 'consolidate-dry', disabled: Boolean(reason), 'aria-describedby': reason ? 'consolidate-why' : null }, 'Dry run now');
  run.addEventListener('click', async () => {
    run.disabled = true;
    try {
      const answer = await api.post('/consolidate', { mode: 'full', dry_run: true });
      ctx.notify(`Dry run ${answer.status}: ${answer.runs.map((r) => `${r.task} ${Object.entries(r.counts || {}).map(([k, v]) => `${k} ${v}`).join(', ') || 'nothing to do'}`).join('; ')}. Nothing was changed.`, 'ok');
      await refresh();
    } catch (error) { ctx.fail(error); run.disabled = false; }
  });
  return h('div', {},
    h('p', { class: 'row' }, run, reason ? h('span', { id: 'consolidate-why', class: 'why' }, reason) : h('span', { class: 'help' }, 'Reports what each task would change, changing nothing.')),
    h('h3', {}, 'Schedule'),
    h('table', {}, h('thead', {}, h('tr', {}, ['task', 'every', 'last run', 'next run'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, (status.next_runs || []).map((r) => h('tr', {},
        h('td', {}, r.task),
        h('td', {}, r.interval_seconds ? `${Math.round(r.interval_seconds / 3600)} h` : 'off'),
        h('td', {}, when(r.last_run)), h('td', {}, when(r.next_run)))))),
    (status.running || []).length ? h('p', {}, `Running now: ${status.running.map((r) => `${r.task} (${r.processed}/${r.total})`).join(', ')}`) : null,
    h('h3', {}, 'Recent runs'),
    runs.length
      ? h('table', {}, h('thead', {}, h('tr', {}, ['task', 'result', 'started', 'counts', 'errors'].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, runs.map((r) => h('tr', {},
          h('td', {}, `${r.task}${r.dry_run ? ' (dry run)' : ''}`), h('td', {}, r.status), h('td', {}, when(r.started)),
          h('td', {}, Object.entries(r.counts || {}).map(([k, v]) => `${k} ${v}`).join(', ')),
          h('td', {}, (r.errors || []).join('; '))))))
      : h('p', { class: 'muted' }, 'No run yet.'));
}

function liveEvents(ctx) {
  const list = h('ol', { class: 'events', 'aria-label': 'Recent events, newest first' });
  const state = h('span', { class: 'stream-state' }, 'connecting…');
  const toggle = h('button', { type: 'button', id: 'stream-toggle' }, 'Pause');
  const stream = openStream({
    onEvent: (e) => {
      if (QUIET.has(e.event)) return;
      const d = typeof e.data === 'object' && e.data ? e.data : {};
      list.prepend(h('li', { 'data-event-id': e.id || '' },
        h('span', { class: 'kind' }, e.event), ' ',
        d.memory_id ? memoryLink(d.memory_id) : null, ' ',
        d.occurred_at ? when(d.occurred_at) : null,
        e.id ? h('span', { class: 'muted' }, ` #${e.id}`) : null));
      while (list.children.length > MAX_EVENTS) list.lastChild.remove();
    },
    onStatus: (s, detail) => {
      const text = {
        connecting: detail ? `reconnecting after event #${detail}…` : 'connecting…',
        open: detail ? `live (resumed after event #${detail})` : 'live',
        retrying: `connection lost (${detail?.message || 'error'}); retrying`,
        paused: 'paused: events are caught up on resume',
        refused: `refused: ${detail?.explained || detail?.message}`,
      }[s] || s;
      state.textContent = text;
      state.dataset.state = s;
    },
  });
  toggle.addEventListener('click', () => {
    if (toggle.textContent === 'Pause') { stream.pause(); toggle.textContent = 'Resume'; } else { stream.resume(); toggle.textContent = 'Pause'; }
  });
  ctx.onLeave(() => stream.stop());
  return h('div', {}, h('p', { class: 'row' }, h('span', {}, 'Stream: ', state), toggle),
    h('div', { 'aria-live': 'polite', 'aria-relevant': 'additions' }, list));
}

async function download(name) {
  const response = await api.raw('GET', `/backup/${encodeURIComponent(name)}`);
  const url = URL.createObjectURL(await response.blob());
  const link = h('a', { href: url, download: name, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}

function backups(ctx, me) {
  const box = h('div', {});
  const list = h('div', {});
  const confirmBox = h('div', { class: 'confirm', hidden: true, role: 'alertdialog', 'aria-labelledby': 'restore-q' });
  const create = h('button', { type: 'button', id: 'backup-create', class: 'primary' }, 'Create a backup now');
  const refresh = async () => {
    const answer = await api.get('/backups');
    if (!ctx.alive()) return;
    list.replaceChildren(answer.backups.length
      ? h('table', {}, h('thead', {}, h('tr', {}, ['name', 'created', 'size', 'memories', ''].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, answer.backups.map((b) => h('tr', {},
          h('td', {}, b.name), h('td', {}, when(b.created_at)), h('td', { class: 'num' }, `${Math.ceil(b.size_bytes / 1024)} KiB`),
          h('td', { class: 'num' }, String(b.nodes?.Memory ?? '—')),
          h('td', { class: 'row' },
            h('button', { type: 'button', onclick: () => download(b.name).catch(ctx.fail) }, 'Download'),
            h('button', { type: 'button', class: 'danger', onclick: () => ask(b.name) }, 'Restore…'))))))
      : h('p', { class: 'muted' }, 'No backup yet.'));
  };
  const ask = (name) => {
    const merge = h('input', { type: 'checkbox', id: 'restore-merge', checked: true });
    const go = h('button', { type: 'button', class: 'danger', id: 'restore-go' }, `Restore ${name}`);
    const cancel = h('button', { type: 'button', class: 'quiet', onclick: () => { confirmBox.hidden = true; } }, 'Cancel');
    go.addEventListener('click', async () => {
      go.disabled = true;
      try {
        const answer = await api.post('/restore', { name, merge: merge.checked });
        ctx.notify(`Restored ${name}: ${answer.created} created, ${answer.updated} updated, ${answer.kept} kept.`, 'ok');
        confirmBox.hidden = true;
      } catch (error) { ctx.fail(error); go.disabled = false; }
    });
    confirmBox.replaceChildren(
      h('p', { id: 'restore-q' }, `Restore ${name} into tenant ${me.tenant}? Its records are written back; with merge, a record stored since is kept when it is newer.`),
      h('label', { class: 'check' }, merge, ' merge into what the tenant holds (without it, the tenant must be empty)'),
      h('div', { class: 'row' }, go, cancel));
    confirmBox.hidden = false;
    go.focus();
  };
  create.addEventListener('click', async () => {
    create.disabled = true;
    try {
      const answer = await api.post('/backup', {});
      ctx.notify(`Backup ${answer.name} written (${Math.ceil(answer.size_bytes / 1024)} KiB).`, 'ok');
      await refresh();
    } catch (error) { ctx.fail(error); } finally { create.disabled = false; }
  });
  box.append(h('p', {}, create), confirmBox, list);
  refresh().catch((error) => list.replaceChildren(h('p', { class: 'error' }, error instanceof ApiError ? error.explained : error.message)));
  return box;
}

export async function render(main, ctx) {
  main.append(h('h1', { tabindex: -1 }, 'Overview'));
  const live = section('Recent events (live)', liveEvents(ctx));
  const [analysis, enrich, consolidate] = await Promise.all([
    api.get('/analyze'), api.get('/enrichment/status').catch(() => null), api.get('/consolidate/status').catch(() => null),
  ]);
  if (!ctx.alive()) return;
  const consolidationBox = section('Consolidation');
  const showConsolidation = (status) => {
    consolidationBox.querySelector('h2').after(status
      ? consolidation(ctx, status, async () => {
        const fresh = await api.get('/consolidate/status');
        if (!ctx.alive()) return;
        consolidationBox.querySelector('h2').nextElementSibling.remove();
        showConsolidation(fresh);
      })
      : h('p', { class: 'muted' }, 'Consolidation status unavailable.'));
  };
  showConsolidation(consolidate);
  add(main,
    h('div', { class: 'columns' },
      h('div', {},
        section(`Memories (${analysis.analytics.total_memories})`, memoryCounts(analysis.analytics)),
        section('Enrichment backlog', enrich ? enrichment(enrich) : h('p', { class: 'muted' }, 'Enrichment status unavailable.'))),
      live),
    consolidationBox,
    ctx.can('admin') ? section('Backups', backups(ctx, ctx.me)) : null,
  );
}
