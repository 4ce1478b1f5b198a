// A memory's neighbourhood as a small SVG: the memory in the middle, its
// neighbours on rings by hops, edges coloured and dashed by type (a legend
// says which), each node a link to its memory (click or Enter).

import { h, snippet, svg } from './dom.js';

const RING = 130; // pixels between rings
const COLOURS = {
  RELATES_TO: '#5b6b7f', LEADS_TO: '#1f6fb2', OCCURRED_BEFORE: '#6b4fa3', PREFERS_OVER: '#a3541f', EXEMPLIFIES: '#2f7d4f',
  CONTRADICTS: '#b3261e', REINFORCES: '#1d7f74', INVALIDATED_BY: '#c2410c', EVOLVED_INTO: '#7a5c00', DERIVED_FROM: '#3f51b5',
  PART_OF: '#8e3a8e', SIMILAR_TO: '#6d6d6d', PRECEDED_BY: '#4e6e2e', DISCOVERED: '#0b6e99',
};
const DASHES = ['', '6 3', '2 3', '8 3 2 3'];

function colour(type) {
  return COLOURS[type] || '#444';
}

function dash(type) {
  const i = Object.keys(COLOURS).indexOf(type);
  return DASHES[(i < 0 ? 0 : i) % DASHES.length];
}

/** Each node's hops from the centre and the node it is reached through (either edge direction). */
function tree(center, edges) {
  const distance = new Map([[center, 0]]);
  const parent = new Map();
  let frontier = [center];
  while (frontier.length) {
    const next = [];
    for (const id of frontier) {
      for (const e of edges) {
        const other = e.source === id ? e.target : e.target === id ? e.source : null;
        if (other && !distance.has(other)) {
          distance.set(other, distance.get(id) + 1);
          parent.set(other, id);
          next.push(other);
        }
      }
    }
    frontier = next;
  }
  return { distance, parent };
}

/** Positions: the centre in the middle, the first ring evenly round it, each further node near the one it hangs from. */
function layout(center, nodes, edges) {
  const { distance, parent } = tree(center.id, edges);
  const at = new Map([[center.id, [0, 0]]]);
  const angle = new Map([[center.id, 0]]);
  const rings = new Map();
  for (const n of nodes) {
    const d = distance.get(n.id) ?? 1;
    if (!rings.has(d)) rings.set(d, []);
    rings.get(d).push(n.id);
  }
  for (const d of [...rings.keys()].sort((a, b) => a - b)) {
    const members = rings.get(d);
    const radius = RING * d;
    if (d === 1 || !members.every((id) => parent.has(id))) {
      members.forEach((id, i) => angle.set(id, (2 * Math.PI * i) / members.length - Math.PI / 2));
    } else {
      const siblings = new Map();
      for (const id of members) {
        const p = parent.get(id);
        if (!siblings.has(p)) siblings.set(p, []);
        siblings.get(p).push(id);
      }
      for (const [p, kids] of siblings) {
        const spread = Math.min(0.9, (2 * Math.PI) / Math.max(members.length, 3)) / d;
        kids.forEach((id, i) => angle.set(id, angle.get(p) + (i - (kids.length - 1) / 2) * spread));
      }
    }
    for (const id of members) at.set(id, [radius * Math.cos(angle.get(id)), radius * Math.sin(angle.get(id))]);
  }
  return at;
}

/** The box around the positions, with room for the labels: {x, y, width, height}. */
function bounds(at) {
  const xs = [...at.values()].map(([x]) => x);
  const ys = [...at.values()].map(([, y]) => y);
  let x = Math.min(...xs) - 80;
  let width = Math.max(...xs) + 80 - x;
  if (width < 280) { x -= (280 - width) / 2; width = 280; }
  const y = Math.min(...ys) - 30;
  return { x, y, width, height: Math.max(...ys) + 45 - y };
}

/** The SVG and its legend for GET /graph/neighbors' answer; `go(id)` moves to a node's memory. */
export function drawGraph(answer, go) {
  const center = answer.center;
  const nodes = answer.graph_neighbors || [];
  const edges = (answer.edges || []).filter((e) => e.source && e.target);
  if (!nodes.length) return h('p', { class: 'muted' }, 'No neighbours: no edge links this memory to another.');
  const at = layout(center, nodes, edges);
  const box = bounds(at);
  const types = [...new Set(edges.map((e) => e.type))].sort();
  const markers = svg('defs', {}, types.map((t) => svg('marker', {
    id: `arrow-${t}`, viewBox: '0 0 10 10', refX: 22, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse',
  }, svg('path', { d: 'M 0 0 L 10 5 L 0 10 z', fill: colour(t) }))));
  const lines = edges.filter((e) => at.has(e.source) && at.has(e.target)).map((e) => {
    const [x1, y1] = at.get(e.source);
    const [x2, y2] = at.get(e.target);
    return svg('line', {
      x1, y1, x2, y2, class: 'edge', stroke: colour(e.type), 'stroke-dasharray': dash(e.type) || null,
      'stroke-width': 1.5 + 2 * Math.min(1, Number(e.strength) || 0), 'marker-end': `url(#arrow-${e.type})`,
    }, svg('title', {}, `${e.type}${e.strength !== undefined ? ` (strength ${Number(e.strength).toFixed(2)})` : ''}`));
  });
  const dots = [center, ...nodes].filter((n) => at.has(n.id)).map((n) => {
    const [x, y] = at.get(n.id);
    const isCenter = n.id === center.id;
    const label = snippet(n.content || n.summary || n.id, 28);
    const link = svg('a', {
      href: `#/memory/${encodeURIComponent(n.id)}`, class: `node${isCenter ? ' center' : ''} state-${n.trust_state || 'active'}`,
      'aria-label': `${isCenter ? 'This memory' : 'Neighbour'}: ${snippet(n.content || n.id, 80)} (${n.type || 'memory'}, ${n.trust_state || 'active'})`,
    },
    svg('title', {}, snippet(n.content || n.id, 200)),
    svg('circle', { cx: x, cy: y, r: isCenter ? 16 : 11 }),
    svg('text', { x, y: y + (isCenter ? 32 : 26), 'text-anchor': 'middle' }, label));
    link.addEventListener('click', (event) => { event.preventDefault(); if (!isCenter) go(n.id); });
    return link;
  });
  const picture = svg('svg', {
    viewBox: `${box.x} ${box.y} ${box.width} ${box.height}`, width: box.width, height: box.height, class: 'graph', role: 'group',
    'aria-label': `Neighbourhood: ${nodes.length} memories, ${edges.length} edges; each node links to its memory`,
  }, markers, svg('g', {}, lines), svg('g', {}, dots));
  const legend = h('ul', { class: 'legend', 'aria-label': 'Edge types' }, types.map((t) => h('li', {},
    svg('svg', { width: 28, height: 10, 'aria-hidden': 'true' },
      svg('line', { x1: 0, y1: 5, x2: 28, y2: 5, stroke: colour(t), 'stroke-width': 3, 'stroke-dasharray': dash(t) || null })),
    ` ${t}`)));
  return h('figure', { class: 'graph-box' }, picture, h('figcaption', {}, legend));
}
