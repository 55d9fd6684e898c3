// Elements made with properties and text nodes only (never innerHTML), so
// nothing a job, user or node names can become markup.
export function h(tag, attrs, ...children) {
  const el = document.createElementNS(tag === 'svg' || (attrs && attrs.svg) ? 'http://www.w3.org/2000/svg' : 'http://www.w3.org/1999/xhtml', tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === 'svg' || value === undefined || value === null || value === false) continue;
    if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (key === 'class') el.setAttribute('class', value);
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

// A table of rows; `columns` are [header, row => cell]. Scrolls sideways on a phone.
export function table(columns, rows, empty) {
  if (!rows.length) return h('p', {class: 'empty'}, empty);
  // Focusable: a keyboard user can scroll it (axe's scrollable-region-focusable).
  return h('div', {class: 'table-wrap', tabindex: 0},
    h('table', {},
      h('thead', {}, h('tr', {}, columns.map(([head]) => h('th', {scope: 'col'}, head)))),
      h('tbody', {}, rows.map((row) => h('tr', {}, columns.map(([, cell]) => h('td', {}, cell(row))))))));
}

export function time(text) {
  if (!text) return '';
  const d = new Date(text);
  return isNaN(d) ? text : d.toLocaleString();
}

// {cpus: 8, memory_mb: 16384, gpus: 0} as "8 cpus, 16384 memory_mb".
export function amounts(obj) {
  if (!obj || typeof obj !== 'object') return obj === undefined ? '' : String(obj);
  return Object.entries(obj).filter(([, v]) => typeof v !== 'object' && v !== '').map(([k, v]) => `${v} ${k}`).join(', ');
}
