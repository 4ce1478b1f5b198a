// The review queue: pending memories with why each waits; approve or reject
// in one click. The API decides who may (the review role): a 403 is shown.

import { api, ApiError } from './api.js';
import { add, badge, h, memoryLink, snippet, when } from './dom.js';

const RULES = {
  tenant: 'This tenant reviews every new memory (REVIEW_TENANTS).',
  low_confidence: 'Its type is reviewed when its confidence is low (REVIEW_LOW_CONFIDENCE_TYPES, below REVIEW_CONFIDENCE_BELOW).',
  fiction: 'The factuality labels call its content fiction (REVIEW_FICTION).',
  contradicts: 'A CONTRADICTS edge names it as the newer of two memories that disagree (REVIEW_CONTRADICTIONS).',
};

function why(m) {
  const rule = RULES[m.review_rule] || `Held back by the rule “${m.review_rule || 'unknown'}”.`;
  return m.review_rule === 'low_confidence' ? `${rule} Type ${m.type}, confidence ${Number(m.confidence).toFixed(2)}.` : rule;
}

function item(ctx, m, list, announce) {
  const note = h('input', { id: `note-${m.id}`, class: 'note', placeholder: 'optional, kept in the audit log' });
  const reason = ctx.why('review', 'Deciding');
  const decide = (approve) => async (event) => {
    const buttons = li.querySelectorAll('button');
    for (const b of buttons) b.disabled = true;
    try {
      const answer = await api.post(`/review/${encodeURIComponent(m.id)}/${approve ? 'approve' : 'reject'}`, note.value ? { note: note.value } : {});
      const next = li.nextElementSibling?.querySelector('button') || li.previousElementSibling?.querySelector('button');
      li.remove();
      announce(approve
        ? `Approved “${snippet(m.content, 60)}”: now ${answer.trust_state}, recall shows it.`
        : `Rejected “${snippet(m.content, 60)}”: withheld, tombstone ${answer.tombstone_id || '—'} keeps the content out.`);
      if (!list.children.length) list.replaceWith(h('p', { class: 'empty' }, 'The queue is empty: nothing waits for review.'));
      else next?.focus();
    } catch (error) {
      for (const b of buttons) b.disabled = false;
      ctx.fail(error);
      event.target.focus();
    }
  };
  const button = (label, approve, cls) => h('button', {
    type: 'button', class: cls, disabled: Boolean(reason), 'aria-describedby': reason ? 'review-why' : null,
    'aria-label': `${label}: ${snippet(m.content, 60)}`, onclick: decide(approve),
  }, label);
  const li = h('li', { class: 'result' },
    h('article', { 'aria-label': snippet(m.content, 60) },
      h('p', { class: 'content' }, m.content),
      h('div', { class: 'meta' }, badge(m.trust_state), h('span', {}, m.type), h('span', {}, 'stored ', when(m.timestamp)),
        (m.tags || []).length ? h('span', {}, `tags ${m.tags.join(', ')}`) : null, memoryLink(m.id, 'Open memory')),
      h('p', { class: 'why-waits' }, h('strong', {}, 'Why it waits: '), why(m)),
      h('div', { class: 'row decide' },
        h('label', { for: `note-${m.id}` }, 'Note'), note,
        button('Approve', true, 'primary'), button('Reject', false, 'danger'))));
  return li;
}

export async function render(main, ctx) {
  const status = h('p', { class: 'sr-status', role: 'status', 'aria-live': 'polite' });
  const announce = (text) => { status.textContent = text; ctx.notify(text, 'ok'); };
  const reason = ctx.why('review', 'Deciding');
  add(main, h('h1', { tabindex: -1 }, 'Review queue'),
    h('p', {}, 'Memories a review rule held back: recall withholds them until someone decides. Oldest first.'),
    reason ? h('p', { id: 'review-why', class: 'why' }, reason) : null,
    status);
  let answer;
  try {
    answer = await api.get('/review', { limit: 50 });
  } catch (error) {
    if (!ctx.alive()) return;
    if (error instanceof ApiError && error.status === 403) {
      main.append(h('p', { class: 'error', role: 'alert' }, `The API refused to show the queue (403): ${error.message}. Ask for a token with the review or admin role.`));
      return;
    }
    throw error;
  }
  if (!ctx.alive()) return;
  if (!answer.memories.length) { main.append(h('p', { class: 'empty' }, 'The queue is empty: nothing waits for review.')); return; }
  const list = h('ol', { class: 'results queue', 'aria-label': 'Pending memories' });
  for (const m of answer.memories) list.append(item(ctx, m, list, announce));
  main.append(h('p', { class: 'muted' }, `${answer.count} waiting${answer.has_more ? ' (more after these)' : ''}.`), list);
}
