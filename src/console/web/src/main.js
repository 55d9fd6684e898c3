// The unisched console (docs/console.md): pages over the public API, routed
// by the URL's hash, in English or Chinese. Everything shown is read with
// the user's own token; nothing is kept but the token (session storage)
// and the language (local storage).
import uPlot from 'uplot';
import {call, get, follow, download, token, setToken, ApiError} from './api.js';
import {h, table, time, amounts} from './dom.js';
import {t, setLanguage, language} from './i18n.js';
import {layout} from './graph.js';

const main = () => document.getElementById('main');
let me = null;  // GET /v1/whoami of the token in use
let leaving = [];  // what to stop when the page changes (a followed log)

const PAGES = [
  ['', 'overview'], ['jobs', 'jobs'], ['nodes', 'nodes'], ['queues', 'queues'], ['sandboxes', 'sandboxes'],
  ['workflows', 'workflows'], ['usage', 'usage'], ['reports', 'reports'], ['alerts', 'alerts'],
];

function show(...content) {
  main().replaceChildren(...content.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}

function failure(e) {
  if (e instanceof ApiError && e.status === 401) {
    setToken('');
    location.hash = '#/login';
    return h('p', {}, t('bad_token'));
  }
  return h('p', {class: 'error', role: 'alert'}, `${t('error')}: ${e.message}${e.field ? ` (${e.field})` : ''}`);
}

function chip(state) {
  return h('span', {class: `chip s-${String(state).toLowerCase()}`}, state);
}

function link(href, text) {
  return h('a', {href}, text);
}

function section(title, ...content) {
  return h('section', {}, h('h2', {}, title), ...content);
}

function isAdmin() {
  return me && me.role === 'platform-admin';
}

// ---- pages ----

async function overview() {
  const [pools, queues, nodes, alerts] = await Promise.all([
    get('/v1/pools'), get('/v1/queues'), get('/v1/nodes'), get('/v1/alerts?state=firing')]);
  const byState = {};
  for (const n of nodes.nodes) byState[n.state] = (byState[n.state] || 0) + 1;
  show(h('h1', {}, t('overview')),
    h('div', {class: 'cards'}, ['up', 'drained', 'down'].map((s) =>
      h('div', {class: `card s-${s}`}, h('div', {class: 'big'}, byState[s] || 0), h('div', {}, `${t('nodes')}: ${t(s)}`)))),
    section(t('pools'), table([
      [t('name'), (p) => p.name], [t('kind_col'), (p) => p.kind],
      [t('allocated'), (p) => amounts(p.allocated)], [t('capacity'), (p) => amounts(p.capacity)],
      [t('utilisation'), (p) => meter(p.allocated, p.capacity)]], pools.pools, t('no_rows'))),
    section(t('queues'), table([
      [t('name'), (q) => q.name], [t('pool'), (q) => q.pool],
      [t('pending'), (q) => q.pending], [t('running'), (q) => q.running]], queues.queues, t('no_rows'))),
    section(t('firing'), table([
      [t('severity'), (a) => a.severity], [t('name'), (a) => a.name], [t('object'), (a) => a.object],
      [t('message'), (a) => a.message], [t('time'), (a) => time(a.fired_at)]], alerts.alerts, t('none'))));
}

// The share of CPUs allocated, as a bar with its figure.
function meter(allocated, capacity) {
  const used = (allocated && allocated.cpus) || 0;
  const all = (capacity && capacity.cpus) || 0;
  const pct = all ? Math.round((100 * used) / all) : 0;
  const fill = h('span', {class: 'fill'});
  fill.style.width = `${Math.min(pct, 100)}%`;  // CSSOM: allowed by the CSP, unlike a style attribute
  return h('span', {class: 'meter', role: 'img', 'aria-label': `${pct}%`}, h('span', {class: 'bar'}, fill), ` ${pct}%`);
}

async function jobs(params) {
  const query = new URLSearchParams({limit: '100'});
  for (const k of ['state', 'queue', 'user', 'project']) if (params.get(k)) query.set(k, params.get(k));
  const list = await get(`/v1/jobs?${query}`);
  const filter = h('form', {class: 'filters', onsubmit: (e) => {
    e.preventDefault();
    const f = new FormData(e.target);
    const next = new URLSearchParams();
    for (const [k, v] of f.entries()) if (v) next.set(k, v);
    location.hash = `#/jobs?${next}`;
  }},
  h('label', {}, t('state'), h('select', {name: 'state'}, h('option', {value: ''}, t('all')),
    ['PENDING', 'HELD', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT', 'NODE_FAIL'].map((s) =>
      h('option', {value: s, selected: params.get('state') === s}, s)))),
  ['queue', 'user', 'project'].map((k) => h('label', {}, t(k), h('input', {name: k, value: params.get(k) || ''}))),
  h('button', {type: 'submit'}, t('filter')));
  show(h('h1', {}, t('jobs'), ' ', h('small', {}, `(${list.total})`)), filter,
    table([
      [t('id'), (j) => link(`#/jobs/${j.id}`, j.id)], [t('name'), (j) => j.name], [t('state'), (j) => chip(j.state)],
      [t('user'), (j) => j.user], [t('project'), (j) => j.project], [t('queue'), (j) => j.queue],
      [t('submitted'), (j) => time(j.submitted_at)]], list.jobs, t('no_rows')),
    submitForm());
}

function submitForm() {
  const status = h('p', {role: 'status'});
  return section(t('submit_job'), h('form', {class: 'submit', onsubmit: async (e) => {
    e.preventDefault();
    const f = new FormData(e.target);
    try {
      const job = await call('POST', '/v1/jobs', {
        workload: {kind: f.get('kind')},
        resources: {cpus: Number(f.get('cpus')), memory_mb: Number(f.get('memory_mb'))},
        command: ['/bin/sh', '-c', f.get('command')],
      });
      location.hash = `#/jobs/${job.id}`;
    } catch (err) {
      status.replaceChildren(failure(err));
    }
  }},
  h('label', {}, t('command'), h('input', {name: 'command', required: true, value: 'echo hello from the console'})),
  h('label', {}, t('kind'), h('select', {name: 'kind'},
    ['hpc', 'ai-training', 'ai-inference', 'agent'].map((k) => h('option', {value: k}, k)))),
  h('label', {}, t('cpus'), h('input', {name: 'cpus', type: 'number', min: 1, value: 1})),
  h('label', {}, t('memory_mb'), h('input', {name: 'memory_mb', type: 'number', min: 1, value: 256})),
  h('button', {type: 'submit'}, t('submit'))), status);
}

async function job(id) {
  const [j, events] = await Promise.all([get(`/v1/jobs/${encodeURIComponent(id)}`),
    get(`/v1/jobs/${encodeURIComponent(id)}/events`)]);
  const log = h('pre', {class: 'log', 'aria-live': 'polite', tabindex: 0});
  const controller = new AbortController();
  leaving.push(() => controller.abort());
  follow(`/v1/jobs/${encodeURIComponent(id)}/log?follow=true`, (text) => log.append(text), controller.signal)
    .catch((e) => { if (e.name !== 'AbortError') log.append(`\n[${e.message}]`); });
  const active = ['PENDING', 'HELD', 'RUNNING'].includes(j.state);
  show(h('h1', {}, `${t('job')} ${j.id} `, chip(j.state), ' ', h('small', {}, j.name)),
    h('dl', {class: 'facts'},
      fact(t('user'), j.user), fact(t('project'), j.project), fact(t('queue'), `${j.queue} (${j.pool})`),
      fact(t('routing'), j.routing && j.routing.reason), fact(t('resources'), amounts(j.resources)),
      fact(t('submitted'), time(j.submitted_at)), fact(t('started'), time(j.started_at)),
      fact(t('ended'), time(j.ended_at)), fact(t('exit_code'), j.exit_code),
      fact(t('estimated_start'), time(j.estimated_start)), fact(t('priority'), amounts(j.priority_factors)),
      fact(t('reason'), j.state_reason)),
    active ? h('button', {type: 'button', onclick: async () => {
      try { await call('DELETE', `/v1/jobs/${encodeURIComponent(id)}`); route(); } catch (e) { main().append(failure(e)); }
    }}, t('cancel')) : null,
    section(t('pending_reasons'), table([[t('reason'), (r) => r.code || r.reason], [t('message'), (r) => r.message]],
      j.pending_reasons || [], t('none'))),
    section(t('attempts'), table([['#', (a) => a.attempt ?? a.number], [t('state'), (a) => a.state],
      [t('node'), (a) => (a.nodes || []).join(', ')], [t('started'), (a) => time(a.started_at)],
      [t('ended'), (a) => time(a.ended_at)], [t('reason'), (a) => a.reason]], j.attempts || [], t('none'))),
    section(t('events'), table([[t('time'), (e) => time(e.time)], [t('kind_col'), (e) => e.kind],
      [t('message'), (e) => e.message]], events.events, t('none'))),
    section(t('log'), log));
}

function fact(name, value) {
  if (value === undefined || value === null || value === '') return null;
  return [h('dt', {}, name), h('dd', {}, value)];
}

async function nodes() {
  const list = await get('/v1/nodes');
  const act = (n, verb) => h('button', {type: 'button', onclick: async () => {
    try {
      await call('POST', `/v1/nodes/${encodeURIComponent(n.name)}/${verb}`, verb === 'drain' ? {reason: 'from the console'} : {});
      route();
    } catch (e) { main().append(failure(e)); }
  }}, t(verb));
  show(h('h1', {}, t('nodes')), table([
    [t('name'), (n) => n.name], [t('pool'), (n) => n.pool], [t('state'), (n) => chip(n.state)],
    [t('reason'), (n) => n.reason], [t('allocated'), (n) => amounts(n.allocated)],
    [t('resources'), (n) => amounts(n.resources)],
    ['', (n) => (isAdmin() ? act(n, n.state === 'drained' ? 'resume' : 'drain') : '')]], list.nodes, t('no_rows')));
}

async function queues() {
  const list = await get('/v1/queues');
  show(h('h1', {}, t('queues')), table([
    [t('name'), (q) => q.name], [t('pool'), (q) => q.pool], [t('kind_col'), (q) => (q.workload_kinds || []).join(', ')],
    [t('pending'), (q) => q.pending], [t('running'), (q) => q.running],
    ['policy', (q) => amounts(q.policy)]], list.queues, t('no_rows')));
}

async function sandboxes() {
  const list = await get('/v1/sandboxes');
  show(h('h1', {}, t('sandboxes')), table([
    [t('id'), (s) => s.id], [t('state'), (s) => chip(s.state)], [t('image'), (s) => s.image],
    [t('user'), (s) => s.user], [t('project'), (s) => s.project], [t('node'), (s) => s.node],
    [t('created'), (s) => time(s.created_at)]], list.sandboxes, t('no_rows')));
}

async function workflows() {
  const list = await get('/v1/workflows');
  show(h('h1', {}, t('workflows')), table([
    [t('id'), (w) => link(`#/workflows/${w.id}`, w.id)], [t('name'), (w) => w.name], [t('state'), (w) => chip(w.state)],
    [t('user'), (w) => w.user], [t('project'), (w) => w.project], [t('submitted'), (w) => time(w.created_at)]],
  list.items, t('no_rows')));
}

async function workflow(id) {
  const w = await get(`/v1/workflows/${encodeURIComponent(id)}`);
  const act = (label, method, path) => h('button', {type: 'button', onclick: async () => {
    try { await call(method, path); route(); } catch (e) { main().append(failure(e)); }
  }}, label);
  show(h('h1', {}, `${w.name || t('workflows')} #${w.id} `, chip(w.state)),
    w.reason ? h('p', {}, w.reason) : null,
    h('p', {}, `${t('counts')}: `, Object.entries(w.counts).filter(([, n]) => n).map(([s, n]) => `${n} ${s}`).join(', ')),
    w.state === 'RUNNING' ? act(t('cancel_workflow'), 'DELETE', `/v1/workflows/${w.id}`) : null,
    ['FAILED', 'CANCELLED'].includes(w.state) ? act(t('resume_workflow'), 'POST', `/v1/workflows/${w.id}/resume`) : null,
    section(t('graph'), drawGraph(w)),
    section(t('tasks'), table([
      [t('name'), (task) => task.name], ['after', (task) => task.after.join(', ')],
      [t('state'), (task) => summary(task)],
      [t('jobs'), (task) => task.instances.flatMap((i) => i.jobs).slice(0, 12).map((j) => [link(`#/jobs/${j}`, j), ' '])]],
    w.tasks, t('none'))),
    section(t('events'), table([[t('time'), (e) => time(e.at)], [t('kind_col'), (e) => e.kind],
      ['task', (e) => e.task], [t('message'), (e) => e.message]], w.events.slice(-50).reverse(), t('none'))));
}

function summary(task) {
  if (task.alternative_for) return `alternative for ${task.alternative_for}`;
  const n = {};
  for (const i of task.instances) n[i.state] = (n[i.state] || 0) + 1;
  return Object.entries(n).map(([s, c]) => `${c} ${s}`).join(', ');
}

// The workflow's tasks as an SVG graph, laid out in columns by depth.
function drawGraph(w) {
  const {nodes: placed, width, height} = layout(w.tasks);
  const svg = h('svg', {svg: true, viewBox: `0 0 ${width} ${height}`, class: 'graph', role: 'img',
    'aria-label': `${t('graph')}: ${w.tasks.map((task) => task.name).join(', ')}`});
  const at = Object.fromEntries(placed.map((p) => [p.name, p]));
  for (const e of w.edges) {
    const a = at[e.from];
    const b = at[e.to];
    if (a && b) svg.append(h('line', {svg: true, x1: a.x + 140, y1: a.y + 20, x2: b.x, y2: b.y + 20, class: 'edge'}));
  }
  for (const p of placed) {
    const task = w.tasks.find((x) => x.name === p.name);
    const worst = ['FAILED', 'CANCELLED', 'SKIPPED', 'RELEASED', 'WAITING', 'SUCCEEDED']
      .find((s) => task.instances.some((i) => i.state === s)) || 'WAITING';
    svg.append(h('g', {svg: true, class: `node s-${task.alternative_for ? 'alternative' : worst.toLowerCase()}`},
      h('rect', {svg: true, x: p.x, y: p.y, width: 140, height: 40, rx: 6}),
      h('text', {svg: true, x: p.x + 8, y: p.y + 17}, task.name),
      h('text', {svg: true, x: p.x + 8, y: p.y + 33, class: 'sub'}, summary(task).slice(0, 26))));
  }
  return h('div', {class: 'graph-wrap', tabindex: 0}, svg);
}

const METRICS = ['cpu_core_seconds', 'gpu_seconds', 'instance_minutes', 'storage_gb_hours', 'cost'];

async function usage(params) {
  const groupBy = params.get('group_by') || 'project';
  const metric = params.get('metric') || 'cpu_core_seconds';
  const to = params.get('to') ? new Date(params.get('to')) : new Date();
  const from = params.get('from') ? new Date(params.get('from')) : new Date(to.getTime() - 7 * 86400e3);
  const query = new URLSearchParams({group_by: `hour,${groupBy}`, from: from.toISOString(), to: to.toISOString()});
  const data = await get(`/v1/usage?${query}`);
  const form = h('form', {class: 'filters', onsubmit: (e) => {
    e.preventDefault();
    const f = new FormData(e.target);
    const next = new URLSearchParams({group_by: f.get('group_by'), metric: f.get('metric')});
    if (f.get('from')) next.set('from', new Date(f.get('from')).toISOString());
    location.hash = `#/usage?${next}`;
  }},
  h('label', {}, t('group_by'), h('select', {name: 'group_by'}, ['project', 'user', 'queue', 'pool', 'workload_kind']
    .map((g) => h('option', {value: g, selected: g === groupBy}, g)))),
  h('label', {}, t('metric'), h('select', {name: 'metric'}, METRICS.map((m) => h('option', {value: m, selected: m === metric}, m)))),
  h('label', {}, t('from'), h('input', {name: 'from', type: 'date', value: from.toISOString().slice(0, 10)})),
  h('button', {type: 'submit'}, t('show')),
  h('button', {type: 'button', onclick: () => {
    const csv = new URLSearchParams({group_by: groupBy, from: from.toISOString(), to: to.toISOString(), format: 'csv'});
    download(`/v1/usage?${csv}`, `usage-${groupBy}.csv`).catch((e) => main().append(failure(e)));
  }}, t('download_csv')));
  const chart = h('div', {class: 'chart', tabindex: 0});
  show(h('h1', {}, t('usage')), form, chart);
  plot(chart, data.rows, groupBy, metric);
}

// One line per group over the hours of the window.
function plot(el, rows, groupBy, metric) {
  const hours = [...new Set(rows.map((r) => r.hour))].sort();
  const groups = [...new Set(rows.map((r) => r[groupBy]))].sort();
  if (!hours.length) {
    el.append(h('p', {class: 'empty'}, t('no_rows')));
    return;
  }
  const xs = hours.map((hour) => new Date(hour).getTime() / 1000);
  const series = groups.map((g) => hours.map((hour) => {
    const r = rows.find((x) => x.hour === hour && x[groupBy] === g);
    return r ? Number(r[metric] || 0) : 0;
  }));
  const palette = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b', '#e377c2'];
  const width = Math.max(300, Math.min(el.clientWidth || 900, 1100));
  // eslint-disable-next-line no-new
  new uPlot({width, height: 320, series: [{}, ...groups.map((g, i) => ({label: String(g), stroke: palette[i % palette.length]}))],
    axes: [{}, {label: metric}]}, [xs, ...series], el);
}

async function reports() {
  const [capacity, cost, pending] = await Promise.all([
    get('/v1/reports/capacity'), get('/v1/reports/cost'), get('/v1/reports/pending')]);
  show(h('h1', {}, t('reports')),
    section(t('capacity_report'), generic(capacity)),
    section(t('cost_report'), generic(cost)),
    section(t('pending_report'), generic(pending)));
}

// A report's lists as tables of their plain fields, its plain fields as facts.
function generic(obj) {
  const facts = [];
  const tables = [];
  for (const [key, value] of Object.entries(obj)) {
    if (Array.isArray(value)) {
      const keys = [...new Set(value.flatMap((v) => (v && typeof v === 'object' ? Object.keys(v) : [])))];
      tables.push(h('h3', {}, key), table(keys.map((k) => [k, (row) => {
        const v = row[k];
        return v && typeof v === 'object' ? amounts(v) : v;
      }]), value, t('none')));
    } else if (value && typeof value === 'object') {
      facts.push(fact(key, amounts(value)));
    } else {
      facts.push(fact(key, value));
    }
  }
  return [h('dl', {class: 'facts'}, facts), tables];
}

async function alerts() {
  const [list, events] = await Promise.all([get('/v1/alerts'), get('/v1/events?limit=200')]);
  show(h('h1', {}, t('alerts')),
    table([[t('state'), (a) => chip(a.state)], [t('severity'), (a) => a.severity], [t('name'), (a) => a.name],
      [t('object'), (a) => a.object], [t('message'), (a) => a.message], [t('time'), (a) => time(a.fired_at)]],
    list.alerts, t('none')),
    section(t('events'), table([[t('time'), (e) => time(e.time)], [t('kind_col'), (e) => e.kind],
      [t('object'), (e) => e.object], [t('message'), (e) => e.message]], events.events, t('none'))));
}

function login() {
  const status = h('p', {role: 'status'});
  show(h('h1', {}, t('login')), h('form', {class: 'login', onsubmit: async (e) => {
    e.preventDefault();
    setToken(new FormData(e.target).get('token').trim());
    try {
      me = await get('/v1/whoami');
      location.hash = '#/';
    } catch (err) {
      setToken('');
      status.replaceChildren(h('p', {class: 'error', role: 'alert'}, t('bad_token')));
    }
  }},
  h('label', {}, t('token'), h('input', {name: 'token', type: 'password', autocomplete: 'off', required: true})),
  h('button', {type: 'submit'}, t('login'))), h('p', {class: 'hint'}, t('login_hint')), status);
}

// ---- the frame ----

function frame() {
  const nav = document.getElementById('nav');
  const current = (location.hash.slice(2).split(/[/?]/)[0]) || '';
  nav.replaceChildren(...(token() ? PAGES.map(([path, key]) =>
    h('a', {href: `#/${path}`, 'aria-current': current === path ? 'page' : null}, t(key))) : []));
  document.getElementById('who').textContent = me ? `${me.user} (${me.role})` : '';
  document.getElementById('logout').hidden = !token();
  document.getElementById('logout').textContent = t('logout');
  document.getElementById('lang').value = language();
}

async function route() {
  for (const stop of leaving) stop();
  leaving = [];
  const [path, queryText] = location.hash.slice(1).split('?');
  const params = new URLSearchParams(queryText || '');
  const parts = path.split('/').filter(Boolean);
  if (!token() && parts[0] !== 'login') {
    location.hash = '#/login';
    return;
  }
  const startedFor = location.hash;
  if (token() && !me && parts[0] !== 'login') {
    try { me = await get('/v1/whoami'); } catch (e) { show(failure(e)); return; }
    // The hash changed while we asked (a logout, a click): that route draws, not this one.
    if (location.hash !== startedFor) return;
  }
  frame();
  show(h('p', {}, t('loading')));
  try {
    switch (parts[0] || '') {
      case 'login': return login();
      case '': return await overview();
      case 'jobs': return parts[1] ? await job(parts[1]) : await jobs(params);
      case 'nodes': return await nodes();
      case 'queues': return await queues();
      case 'sandboxes': return await sandboxes();
      case 'workflows': return parts[1] ? await workflow(parts[1]) : await workflows();
      case 'usage': return await usage(params);
      case 'reports': return await reports();
      case 'alerts': return await alerts();
      default: return show(h('p', {}, '404'));
    }
  } catch (e) {
    show(failure(e));
  }
}

function start() {
  setLanguage(localStorage.getItem('unisched.lang') || (navigator.language.startsWith('zh') ? 'zh-CN' : 'en'));
  document.getElementById('lang').addEventListener('change', (e) => {
    localStorage.setItem('unisched.lang', e.target.value);
    setLanguage(e.target.value);
    route();
  });
  document.getElementById('logout').addEventListener('click', () => {
    setToken('');
    me = null;
    location.hash = '#/login';
  });
  window.addEventListener('hashchange', route);
  route();
}

document.addEventListener('DOMContentLoaded', start);
