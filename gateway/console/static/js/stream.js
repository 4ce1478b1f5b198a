// GET /stream read with fetch (EventSource cannot send the Authorization
// header), parsed as server-sent events, reconnecting with Last-Event-ID so
// nothing between two connections is lost.

import { apiUrl, authHeaders, errorOf } from './api.js';

const MAX_DELAY_MS = 15000;

/** One SSE block ("id: ..\nevent: ..\ndata: ..") as {id, event, data}; null for a comment. */
export function parseBlock(block) {
  const out = { id: null, event: 'message', data: [] };
  let any = false;
  for (const line of block.split('\n')) {
    if (!line || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    any = true;
    if (field === 'id') out.id = value;
    else if (field === 'event') out.event = value;
    else if (field === 'data') out.data.push(value);
  }
  if (!any) return null;
  const text = out.data.join('\n');
  try { out.data = text ? JSON.parse(text) : {}; } catch { out.data = text; }
  return out;
}

/**
 * Opens the tenant's stream: onEvent({id, event, data}) for each event,
 * onStatus(state, detail) with state connecting, open, retrying or refused.
 * stop() ends it; pause()/resume() close and reopen it from the last event seen.
 */
export function openStream({ onEvent, onStatus }) {
  let lastId = null;
  let stopped = false;
  let paused = false;
  let controller = null;
  let wake = null;

  async function connectOnce() {
    controller = new AbortController();
    const headers = authHeaders({ Accept: 'text/event-stream' });
    if (lastId !== null) headers['Last-Event-ID'] = lastId;
    onStatus('connecting', lastId);
    const response = await fetch(apiUrl('/stream'), { headers, signal: controller.signal, cache: 'no-store' });
    if (!response.ok) throw await errorOf(response);
    onStatus('open', lastId);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value.replace(/\r\n?/g, '\n');
      let end;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const event = parseBlock(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
        if (!event) continue;
        if (event.id !== null && event.id !== '') lastId = event.id;
        onEvent(event);
      }
    }
  }

  async function loop() {
    let delay = 1000;
    while (!stopped) {
      if (paused) { await new Promise((resolve) => { wake = resolve; }); continue; }
      try {
        await connectOnce();
        delay = 1000;
      } catch (error) {
        if (stopped) return;
        if (paused) continue;
        if (error.status === 401 || error.status === 403) { onStatus('refused', error); return; }
        onStatus('retrying', error);
      }
      if (stopped || paused) continue;
      await new Promise((resolve) => { wake = resolve; setTimeout(resolve, delay); });
      delay = Math.min(delay * 2, MAX_DELAY_MS);
    }
  }

  loop();
  return {
    get lastId() { return lastId; },
    pause() { paused = true; controller?.abort(); onStatus('paused', lastId); },
    resume() { paused = false; wake?.(); },
    stop() { stopped = true; controller?.abort(); wake?.(); },
  };
}
