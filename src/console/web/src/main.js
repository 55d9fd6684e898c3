// The unisched console (docs/console.md): pages over the public API, routed
// by the URL's hash, in English or Chinese. Everything shown is read with
// the user's own token; nothing is kept but the token (session storage)
// and the language (local storage).
import uPlot from 'uplot';
import {call, get, follow, download, token, setToken, ApiError} from './api.js';
import {h, Fragment, render, table, time, amounts, figure} from './dom.js';
import {useEffect, useRef, useState} from 'preact/hooks';
import {t, setLanguage, language} from './i18n.js';
import {layout} from './graph.js';

const main = () => document.getElementById('main');
let me = null;  // GET /v1/whoami of the token in use

const PAGES = [
  ['', 'overview'], ['jobs', 'jobs'], ['nodes', 'nodes'], ['queues', 'queues'], ['sandboxes', 'sandboxes'],
  ['workflows', 'workflows'], ['usage', 'usage'], ['reports', 'reports'], ['alerts', 'alerts'],
];

// The page: rendered by Preact, which keeps what did not change and lets the
// page's parts (a followed log, a plot) clean up when they go.
function show(...content) {
  render(h(Fragment, {}, ...content), main());
}

// What an error says; a refused token logs out. Called where the error is
// caught, never while rendering.
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
  // Preact sets a style object through the CSSOM: allowed by the CSP, unlike a style attribute.
  const fill = h('span', {class: 'fill', style: {width: `${Math.min(pct, 100)}%`}});
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
  return section(t('submit_job'), h(SubmitForm, {}));
}

function SubmitForm() {
  const [status, setStatus] = useState(null);
  return h(Fragment, {}, h('form', {class: 'submit', onsubmit: async (e) => {
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
      setStatus(failure(err));
    }
  }},
  h('label', {}, t('command'), h('input', {name: 'command', required: true, defaultValue: 'echo hello from the console'})),
  h('label', {}, t('kind'), h('select', {name: 'kind'},
    ['hpc', 'ai-training', 'ai-inference', 'agent'].map((k) => h('option', {value: k}, k)))),
  h('label', {}, t('cpus'), h('input', {name: 'cpus', type: 'number', min: 1, defaultValue: 1})),
  h('label', {}, t('memory_mb'), h('input', {name: 'memory_mb', type: 'number', min: 1, defaultValue: 256})),
  h('button', {type: 'submit'}, t('submit'))), h('div', {role: 'status'}, status));
}

// A button whose action may fail: the error shows beside it. The page is
// read again after it unless `stay` (a download changes nothing).
function Action({label, run, stay}) {
  const [error, setError] = useState(null);
  return h(Fragment, {}, h('button', {type: 'button', onclick: async () => {
    try {
      await run();
      if (!stay) route();
    } catch (e) {
      setError(failure(e));
    }
  }}, label), error);
}

// A job's output, read as it arrives while the job runs; stops when the page goes.
function Log({path}) {
  const [text, setText] = useState('');
  useEffect(() => {
    setText('');
    const controller = new AbortController();
    follow(path, (chunk) => setText((old) => old + chunk), controller.signal)
      .catch((e) => { if (e.name !== 'AbortError') setText((old) => `${old}\n[${e.message}]`); });
    return () => controller.abort();
  }, [path]);
  return h('pre', {class: 'log', 'aria-live': 'polite', tabindex: 0}, text);
}

async function job(id) {
  const [j, events] = await Promise.all([get(`/v1/jobs/${encodeURIComponent(id)}`),
    get(`/v1/jobs/${encodeURIComponent(id)}/events`)]);
  const active = ['PENDING', 'HELD', 'RUNNING'].includes(j.state);
  show(h('h1', {}, `${t('job')} ${j.id} `, chip(j.state), ' ', h('small', {}, j.name)),
    h('dl', {class: 'facts'},
      fact(t('user'), j.user), fact(t('project'), j.project), fact(t('queue'), `${j.queue} (${j.pool})`),
      fact(t('routing'), j.routing && j.routing.reason), fact(t('resources'), amounts(j.resources)),
      fact(t('submitted'), time(j.submitted_at)), fact(t('started'), time(j.started_at)),
      fact(t('ended'), time(j.ended_at)), fact(t('exit_code'), j.exit_code),
      fact(t('estimated_start'), time(j.estimated_start)), fact(t('predicted_run'), j.predicted_run_seconds),
      fact(t('priority'), amounts(j.priority_factors)), fact(t('reason'), j.state_reason),
      fact(t('job_usage'), usageText(j.usage))),
    active ? h(Action, {label: t('cancel'), run: () => call('DELETE', `/v1/jobs/${encodeURIComponent(id)}`)}) : null,
    section(t('pending_reasons'), table([[t('reason'), (r) => r.code || r.reason], [t('message'), (r) => r.message]],
      j.pending_reasons || [], t('none'))),
    section(t('attempts'), table([['#', (a) => a.attempt ?? a.number], [t('state'), (a) => a.state],
      [t('node'), (a) => (a.nodes || []).join(', ')], [t('started'), (a) => time(a.started_at)],
      [t('ended'), (a) => time(a.ended_at)], [t('reason'), (a) => a.reason]], j.attempts || [], t('none'))),
    section(t('events'), table([[t('time'), (e) => time(e.time)], [t('kind_col'), (e) => e.kind],
      [t('message'), (e) => e.message]], events.events, t('none'))),
    section(t('log'), h(Log, {path: `/v1/jobs/${encodeURIComponent(id)}/log?follow=true`})));
}

// A job's ledger figures, CPU and GPU time in hours as the usage page shows them.
function usageText(usage) {
  if (!usage) return '';
  const hours = {cpu_core_seconds: 'cpu_hours', gpu_seconds: 'gpu_hours'};
  return Object.entries(usage).filter(([k]) => k !== 'instance_seconds' && k !== 'memory_mb_seconds')
    .map(([k, v]) => (hours[k] ? `${short(v / 3600)} ${t(hours[k])}` : `${short(v)} ${t(k)}`)).join(', ');
}

function fact(name, value) {
  if (value === undefined || value === null || value === '') return null;
  return [h('dt', {}, name), h('dd', {}, value)];
}

async function nodes() {
  const list = await get('/v1/nodes');
  const act = (n, verb) => h(Action, {label: t(verb), run: () =>
    call('POST', `/v1/nodes/${encodeURIComponent(n.name)}/${verb}`, verb === 'drain' ? {reason: 'from the console'} : {})});
  show(h('h1', {}, t('nodes')), table([
    [t('name'), (n) => n.name], [t('pool'), (n) => n.pool], [t('state'), (n) => chip(n.state)],
    [t('reason'), (n) => n.reason], [t('allocated'), (n) => amounts(n.allocated)],
    [t('resources'), (n) => amounts(n.resources)],
    ['', (n) => (isAdmin() ? act(n, n.state === 'drained' ? 'resume' : 'drain') : '')]], list.nodes, t('no_rows')));
}

// A queue policy's settings but its type, as "name: value" (nested ones flattened by their path).
function settings(policy, prefix = '') {
  if (!policy || typeof policy !== 'object') return '';
  return Object.entries(policy).filter(([k, v]) => !(prefix === '' && k === 'type') && v !== null && v !== '')
    .map(([k, v]) => (v && typeof v === 'object' ? settings(v, `${prefix}${k}.`) : `${prefix}${k}: ${v}`))
    .filter(Boolean).join(', ');
}

async function queues() {
  const list = await get('/v1/queues');
  show(h('h1', {}, t('queues')), table([
    [t('name'), (q) => q.name], [t('pool'), (q) => q.pool], [t('kind_col'), (q) => (q.workload_kinds || []).join(', ')],
    [t('pending'), (q) => q.pending], [t('running'), (q) => q.running],
    [t('policy'), (q) => (q.policy && q.policy.type) || ''], [t('limits'), (q) => settings(q.policy)]],
  list.queues, t('no_rows')));
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
  const act = (label, method, path) => h(Action, {label, run: () => call(method, path)});
  show(h('h1', {}, `${w.name || t('workflows')} #${w.id} `, chip(w.state)),
    w.reason ? h('p', {}, w.reason) : null,
    h('p', {}, `${t('counts')}: `, Object.entries(w.counts).filter(([, n]) => n).map(([s, n]) => `${n} ${s}`).join(', ')),
    w.state === 'RUNNING' ? act(t('cancel_workflow'), 'DELETE', `/v1/workflows/${w.id}`) : null,
    ['FAILED', 'CANCELLED'].includes(w.state) ? act(t('resume_workflow'), 'POST', `/v1/workflows/${w.id}/resume`) : null,
    section(t('graph'), drawGraph(w)),
    section(t('tasks'), table([
      [t('name'), (task) => task.name], [t('after'), (task) => task.after.join(', ')],
      [t('state'), (task) => summary(task)],
      [t('jobs'), (task) => task.instances.flatMap((i) => i.jobs).slice(0, 12).map((j) => [link(`#/jobs/${j}`, j), ' '])]],
    w.tasks, t('none'))),
    section(t('events'), table([[t('time'), (e) => time(e.at)], [t('kind_col'), (e) => e.kind],
      [t('task'), (e) => e.task], [t('message'), (e) => e.message]], w.events.slice(-50).reverse(), t('none'))));
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
  const at = Object.fromEntries(placed.map((p) => [p.name, p]));
  const edges = w.edges.filter((e) => at[e.from] && at[e.to]).map((e) => {
    const [a, b] = [at[e.from], at[e.to]];
    return h('line', {x1: a.x + 140, y1: a.y + 20, x2: b.x, y2: b.y + 20, class: 'edge'});
  });
  const boxes = placed.map((p) => {
    const task = w.tasks.find((x) => x.name === p.name);
    const worst = ['FAILED', 'CANCELLED', 'SKIPPED', 'RELEASED', 'WAITING', 'SUCCEEDED']
      .find((s) => task.instances.some((i) => i.state === s)) || 'WAITING';
    return h('g', {class: `node s-${task.alternative_for ? 'alternative' : worst.toLowerCase()}`},
      h('rect', {x: p.x, y: p.y, width: 140, height: 40, rx: 6}),
      h('text', {x: p.x + 8, y: p.y + 17}, task.name),
      h('text', {x: p.x + 8, y: p.y + 33, class: 'sub'}, summary(task).slice(0, 26)));
  });
  return h('div', {class: 'graph-wrap', tabindex: 0},
    h('svg', {viewBox: `0 0 ${width} ${height}`, class: 'graph', role: 'img',
      'aria-label': `${t('graph')}: ${w.tasks.map((task) => task.name).join(', ')}`}, edges, boxes));
}

const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b', '#e377c2'];

// A uPlot chart of `series` ([{label, values}]) over `xs` (Unix seconds);
// made once the element is in the page, destroyed when the page goes.
function Chart({xs, series, unit, label}) {
  const ref = useRef(null);
  useEffect(() => {
    const el = ref.current;
    const width = Math.max(300, Math.min(el.clientWidth || 900, 1100));
    const plot = new uPlot({width, height: 320,
      scales: {x: {time: true, range: [xs[0], xs[xs.length - 1]]}},
      series: [{}, ...series.map((s, i) => ({label: s.label, stroke: s.stroke || PALETTE[i % PALETTE.length],
        dash: s.dash, value: (u, v) => (v === null ? '' : `${short(v)} ${unit}`)}))],
      axes: [{}, {label: unit, size: 70, values: (u, splits) => splits.map(short)}]},
    [xs, ...series.map((s) => s.values)], el);
    return () => plot.destroy();
  }, [xs, series, unit]);
  return h('div', {class: 'chart', tabindex: 0, ref, 'aria-label': label});
}

// A figure with four significant digits at most (usage can be a few millionths of an hour).
function short(v) {
  return typeof v === 'number' && !Number.isInteger(v) ? Number(v.toPrecision(4)) : v;
}

// The start of every hour in [from, to] (Unix ms), so hours without usage plot as zero.
function hoursOf(from, to) {
  const out = [];
  for (let ms = Math.floor(from.getTime() / 3600e3) * 3600e3; ms <= to.getTime(); ms += 3600e3) out.push(ms);
  return out;
}

// What the usage page plots: the ledger's figure and its scale, so CPU and
// GPU time read in hours (the ledger keeps seconds).
const METRICS = {
  cpu_hours: ['cpu_core_seconds', 1 / 3600], gpu_hours: ['gpu_seconds', 1 / 3600],
  instance_minutes: ['instance_minutes', 1], storage_gb_hours: ['storage_gb_hours', 1], cost: ['cost', 1],
};

async function usage(params) {
  const groupBy = params.get('group_by') || 'project';
  const metric = METRICS[params.get('metric')] ? params.get('metric') : 'cpu_hours';
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
  h('label', {}, t('metric'), h('select', {name: 'metric'},
    Object.keys(METRICS).map((m) => h('option', {value: m, selected: m === metric}, t(m))))),
  h('label', {}, t('from'), h('input', {name: 'from', type: 'date', value: from.toISOString().slice(0, 10)})),
  h('button', {type: 'submit'}, t('show')),
  h(Action, {label: t('download_csv'), stay: true, run: () => {
    const csv = new URLSearchParams({group_by: `hour,${groupBy}`, from: from.toISOString(), to: to.toISOString(), format: 'csv'});
    return download(`/v1/usage?${csv}`, `usage-${groupBy}.csv`);
  }}));
  show(h('h1', {}, t('usage')), form, usagePlot(data.rows, groupBy, metric, from, to));
}

// One line per group over every hour of the window (zero where nothing was used).
function usagePlot(rows, groupBy, metric, from, to) {
  const [field, scale] = METRICS[metric];
  if (!rows.length) return h('p', {class: 'empty'}, t('no_rows'));
  const hours = hoursOf(from, to);
  const groups = [...new Set(rows.map((r) => r[groupBy]))].sort();
  const value = new Map(rows.map((r) => [`${new Date(r.hour).getTime()}\u0000${r[groupBy]}`,
    Number(r[field] || 0) * scale]));
  return h(Chart, {xs: hours.map((ms) => ms / 1000), unit: t(metric), label: t(metric),
    series: groups.map((g) => ({label: String(g), values: hours.map((ms) => value.get(`${ms}\u0000${g}`) || 0)}))});
}

async function reports() {
  const [capacity, cost, pending] = await Promise.all([
    get('/v1/reports/capacity'), get('/v1/reports/cost'), get('/v1/reports/pending')]);
  show(h('h1', {}, t('reports')),
    section(t('capacity_report'), capacityReport(capacity)),
    section(t('cost_report'), costReport(cost)),
    section(t('pending_report'), pendingReport(pending)));
}

const percent = (share) => (share === null || share === undefined ? '' : `${figure(100 * share, 1)}%`);

// Each pool's utilisation by the hour (of its binding resource: GPUs where it
// has any), against the ceiling the target headroom leaves; the pools' peak,
// average and shares; the nodes idle now and for how long.
function capacityReport(report) {
  const hours = hoursOf(new Date(report.from), new Date(report.to));
  const ceiling = 100 - report.target_headroom_percent;
  const series = report.pools.map((p) => {
    const at = new Map(p.hours.map((x) => [new Date(x.hour).getTime(),
      p.resource === 'gpu' ? x.gpu_utilisation : x.cpu_utilisation]));
    return {label: `${p.pool} (${p.resource})`, values: hours.map((ms) => 100 * (at.get(ms) || 0))};
  });
  series.push({label: `${t('target')} (${ceiling}%)`, values: hours.map(() => ceiling), stroke: '#555', dash: [6, 4]});
  const idle = report.pools.flatMap((p) => p.idle_nodes.map((n) => ({...n, pool: p.pool})));
  return [
    h('p', {}, `${time(report.from)} – ${time(report.to)}; ${t('headroom')} ≥ ${report.target_headroom_percent}%`),
    h(Chart, {xs: hours.map((ms) => ms / 1000), series, unit: '%', label: t('utilisation')}),
    table([[t('pool'), (p) => p.pool], [t('resource'), (p) => p.resource], [t('nodes'), (p) => p.nodes],
      [t('peak'), (p) => percent(p.peak_utilisation)], [t('average'), (p) => percent(p.average_utilisation)],
      [t('headroom'), (p) => percent(p.headroom)], [t('meets_target'), (p) => (p.meets_target ? '✓' : '✗')],
      [t('share_of_nodes'), (p) => `${figure(p.share_of_nodes_percent, 1)}%`],
      [t('share_of_busy'), (p) => `${figure(p.share_of_busy_nodes_percent, 1)}%`],
      [t('target_share'), (p) => (p.target_share_percent === null ? '' : `${p.target_share_percent}%`)]],
    report.pools, t('no_rows')),
    h('h3', {}, t('idle')),
    table([[t('pool'), (n) => n.pool], [t('node'), (n) => n.node], [t('idle_since'), (n) => time(n.idle_since)],
      [t('idle_for'), (n) => `${figure(n.idle_seconds / 3600, 1)} h`]], idle, t('none')),
  ];
}

// How long, in the largest units that matter ("2 d 3 h", "4 h 12 min", "45 s").
function duration(seconds) {
  const s = Math.max(0, Math.round(Number(seconds) || 0));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}

// Unit cost per workload kind (the seed's S17) and who spends most.
function costReport(report) {
  const spenders = (key) => table([[t(key), (r) => r[key]], [t('cost'), (r) => short(r.cost)],
    [t('share'), (r) => percent(r.share)]], report[`top_${key}s`], t('none'));
  return [
    h('p', {}, `${t('total_cost')}: ${short(report.total_cost)}`),
    table([[t('kind'), (k) => k.workload_kind], [t('jobs'), (k) => k.jobs], [t('cost'), (k) => short(k.cost)],
      [t('cpu_hours'), (k) => short(k.cpu_hours)], [t('gpu_hours'), (k) => short(k.gpu_hours)],
      [t('instance_minutes'), (k) => short(k.instance_minutes)], [t('cost_per_job'), (k) => short(k.cost_per_job)],
      [t('cost_per_cpu_hour'), (k) => short(k.cost_per_cpu_hour)],
      [t('cost_per_gpu_hour'), (k) => short(k.cost_per_gpu_hour)],
      [t('cost_per_instance_minute'), (k) => short(k.cost_per_instance_minute)]], report.by_workload_kind, t('none')),
    h('h3', {}, t('top_projects')), spenders('project'),
    h('h3', {}, t('top_users')), spenders('user'),
  ];
}

// Why jobs wait, by reason, and the longest waits: the seed's troubleshooting table.
function pendingReport(report) {
  return [
    h('p', {}, `${t('waiting_total')}: ${report.total}`),
    table([[t('reason'), (r) => r.code], [t('count'), (r) => r.count], [t('pools'), (r) => amounts(r.pools)],
      [t('longest_wait'), (r) => duration(r.longest_wait_seconds)],
      [t('job'), (r) => link(`#/jobs/${r.longest_waiting_job}`, r.longest_waiting_job)],
      [t('message'), (r) => r.example]], report.by_reason, t('none')),
    h('h3', {}, t('longest')),
    table([[t('id'), (j) => link(`#/jobs/${j.id}`, j.id)], [t('name'), (j) => j.name], [t('user'), (j) => j.user],
      [t('project'), (j) => j.project], [t('queue'), (j) => j.queue], [t('state'), (j) => chip(j.state)],
      [t('waited'), (j) => duration(j.waiting_seconds)],
      [t('reason'), (j) => (j.reason ? `${j.reason.code}: ${j.reason.message}` : '')]], report.longest, t('none')),
  ];
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
  show(h('h1', {}, t('login')), h(LoginForm, {}), h('p', {class: 'hint'}, t('login_hint')));
}

function LoginForm() {
  const [refused, setRefused] = useState(false);
  return h(Fragment, {}, h('form', {class: 'login', onsubmit: async (e) => {
    e.preventDefault();
    setToken(new FormData(e.target).get('token').trim());
    try {
      me = await get('/v1/whoami');
      location.hash = '#/';
    } catch (err) {
      setToken('');
      setRefused(true);
    }
  }},
  h('label', {}, t('token'), h('input', {name: 'token', type: 'password', autocomplete: 'off', required: true})),
  h('button', {type: 'submit'}, t('login'))),
  h('div', {role: 'status'}, refused ? h('p', {class: 'error', role: 'alert'}, t('bad_token')) : null));
}

// ---- the frame ----

function frame() {
  const nav = document.getElementById('nav');
  const current = (location.hash.slice(2).split(/[/?]/)[0]) || '';
  render(h(Fragment, {}, token() ? PAGES.map(([path, key]) =>
    h('a', {href: `#/${path}`, 'aria-current': current === path ? 'page' : null}, t(key))) : null), nav);
  document.getElementById('who').textContent = me ? `${me.user} (${me.role})` : '';
  document.getElementById('logout').hidden = !token();
  document.getElementById('logout').textContent = t('logout');
  document.getElementById('lang').value = language();
}

async function route() {
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
