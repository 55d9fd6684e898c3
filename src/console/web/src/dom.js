// The pages are Preact elements: text is always set as text (never as
// markup), so nothing a job, user or node names can become HTML.
import {h} from 'preact';

export {h, Fragment, render} from 'preact';

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

// A number for reading: at most `digits` decimals, no trailing zeros.
export function figure(value, digits = 2) {
  if (value === null || value === undefined || value === '') return '';
  const n = Number(value);
  return Number.isFinite(n) ? String(Math.round(n * 10 ** digits) / 10 ** digits) : String(value);
}
