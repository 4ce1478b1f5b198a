// Building elements without HTML: every string becomes a text node or an
// attribute value, never markup, so memory content cannot inject anything.

/** An element: props are attributes (class, text, on<event> handlers aside), children nodes or strings. */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  setProps(el, props);
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

function setProps(el, props) {
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === 'class') el.setAttribute('class', value);
    else if (key === 'text') el.textContent = String(value);
    else if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? '' : String(value));
  }
}

const SVG = 'http://www.w3.org/2000/svg';

/** An SVG element, props as in h(). */
export function svg(tag, props = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  setProps(el, props);
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** A time as the reader's locale shows it, with the ISO text kept in a tooltip. */
export function when(iso) {
  if (!iso) return h('span', { class: 'muted' }, '—');
  const date = new Date(iso);
  const shown = Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
  return h('time', { datetime: iso, title: iso }, shown);
}

/** A trust or validity state as a badge, coloured by its class. */
export function badge(state, label = state) {
  return h('span', { class: `badge state-${String(state).replace(/[^a-z_]/gi, '')}` }, label || 'active');
}

/** A link to a memory's page. */
export function memoryLink(id, label) {
  return h('a', { href: `#/memory/${encodeURIComponent(id)}` }, label ?? shortId(id));
}

export function shortId(id) {
  return String(id).slice(0, 8);
}

/** The first `n` characters of a text, whole words, with an ellipsis when cut. */
export function snippet(text, n = 140) {
  const t = String(text ?? '');
  if (t.length <= n) return t;
  const cut = t.slice(0, n);
  return `${cut.slice(0, cut.lastIndexOf(' ') > n / 2 ? cut.lastIndexOf(' ') : n)}…`;
}

/** A <dl> of label → value rows (values: nodes or strings). */
export function fields(rows) {
  return h('dl', { class: 'fields' }, rows.map(([label, value]) => [h('dt', {}, label), h('dd', {}, value)]));
}

/** A section with a heading. */
export function section(title, ...children) {
  const id = `s-${title.toLowerCase().replace(/[^a-z0-9]+/g, '-')}`;
  return h('section', { class: 'panel', 'aria-labelledby': id }, h('h2', { id }, title), ...children);
}

/** Replaces an element's children; null, undefined and false are left out (DOM methods would print them). */
export function put(el, ...children) {
  el.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

/** Appends children, leaving out null, undefined and false. */
export function add(el, ...children) {
  el.append(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}
