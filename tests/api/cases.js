// What each answer of docs/openapi.yaml takes to get from a live daemon: the
// objects it needs (setup) and, per operation and status, the request
// (prepare). Shared by the dredd hooks (dredd-hooks.js) and the Prism driver
// (prism-driver.js); scripts/api-conformance.sh runs both (docs/testing.md).
//
// A request is {method, path, query, token, headers, body}: `path` with its
// parameters filled (percent-encoded as OpenAPI 3.0 expands them), `token` one
// of the callers below or a raw token, `body` a string, an object (sent as
// JSON) or undefined (the document's example, when it has one).
// `invalid: '...'` marks a request that breaks the document on purpose (the
// daemon's 400 and out-of-bounds 422 answers can only be had so): a
// validating proxy must refuse it itself, and says why. `skip: '...'` marks
// an answer a single healthy daemon cannot give, and says why.
'use strict';

const fs = require('fs');
const yaml = require('js-yaml');

const URL_BASE = process.env.CONFORMANCE_URL;
const ADMIN = process.env.CONFORMANCE_ADMIN_TOKEN;
const spec = yaml.load(fs.readFileSync(process.env.CONFORMANCE_SPEC, 'utf8'));

const AGENT_NODE = 'x86-c4m8-agent-01';
const WRONG_TOKEN = 'usk_' + 'A'.repeat(43);
const NO_SUCH_TOKEN_ID = 'tok_0000000000000000';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Every operation of the document: {id, method, path, op, params, answers}
// with answers [{status, mediaType}] as the document lists them.
function operations() {
  const out = [];
  for (const [path, item] of Object.entries(spec.paths)) {
    for (const [method, op] of Object.entries(item)) {
      if (method === 'parameters') continue;
      const answers = [];
      for (const [status, response0] of Object.entries(op.responses)) {
        const response = resolve(response0);
        const types = Object.keys(response.content || {});
        if (types.length === 0) answers.push({status, mediaType: null});
        for (const t of types) answers.push({status, mediaType: t});
      }
      out.push({id: op.operationId, method: method.toUpperCase(), path, op, answers});
    }
  }
  return out;
}

function resolve(node) {
  while (node && node.$ref) {
    node = node.$ref.slice(2).split('/').reduce((at, key) => at[key], spec);
  }
  return node;
}

// The JSON Schema (draft 7) of an OpenAPI 3.0 schema: references inlined,
// `nullable` as a null type, OpenAPI-only keywords dropped.
function jsonSchema(schema) {
  const convert = (s) => {
    if (Array.isArray(s)) return s.map(convert);
    if (!s || typeof s !== 'object') return s;
    if (s.$ref) return convert(resolve(s));
    const out = {};
    for (const [k, v] of Object.entries(s)) {
      if (['nullable', 'example', 'examples', 'discriminator', 'xml', 'externalDocs', 'deprecated',
           'readOnly', 'writeOnly'].includes(k) || k.startsWith('x-')) continue;
      if (k === 'properties') {
        out.properties = {};
        for (const [name, p] of Object.entries(v)) out.properties[name] = convert(p);
      } else if (k === 'format' && !['date-time', 'date', 'email', 'uri', 'ipv4', 'ipv6'].includes(v)) {
        continue;  // int64, binary, ...: OpenAPI's, not JSON Schema's
      } else if (k === 'additionalProperties' && typeof v === 'object') {
        out.additionalProperties = convert(v);
      } else {
        out[k] = ['items', 'not', 'allOf', 'anyOf', 'oneOf'].includes(k) ? convert(v) : v;
      }
    }
    if (s.nullable) {
      if (out.type) out.type = [].concat(out.type, 'null');
      if (out.enum) out.enum = out.enum.concat([null]);
      if (!out.type && (out.allOf || out.oneOf || out.anyOf)) return {anyOf: [out, {type: 'null'}]};
    }
    return out;
  };
  return Object.assign({$schema: 'http://json-schema.org/draft-07/schema#'}, convert(schema));
}

// The response schema of an answer, or null.
function responseSchema(op, status, mediaType) {
  const response = resolve(op.responses[status]);
  const content = response && response.content && response.content[mediaType];
  return content && content.schema ? jsonSchema(content.schema) : null;
}

function example(op) {
  const body = op.requestBody && resolve(op.requestBody);
  const content = body && body.content && body.content['application/json'];
  return content ? content.example : undefined;
}

// The daemon, called directly (fixtures).
async function call(method, path, body, token = ADMIN, headers = {}) {
  const h = Object.assign({}, headers);
  if (token) h.Authorization = 'Bearer ' + token;
  let data;
  if (body !== undefined) {
    if (typeof body === 'string' || Buffer.isBuffer(body)) {
      data = body;
    } else {
      data = JSON.stringify(body);
      h['Content-Type'] = 'application/json';
    }
  }
  const res = await fetch(URL_BASE + path, {method, headers: h, body: data});
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch (e) { /* not JSON */ }
  return {status: res.status, text, json};
}

async function must(method, path, body, token, expect) {
  const r = await call(method, path, body, token);
  if (expect ? r.status !== expect : r.status >= 300) {
    throw new Error(`fixture: ${method} ${path} answered ${r.status}: ${r.text}`);
  }
  return r.json;
}

async function waitJob(id, states, seconds = 60) {
  for (let i = 0; i < seconds * 10; ++i) {
    const job = await must('GET', `/v1/jobs/${id}`);
    if (states.includes(job.state)) return job;
    await sleep(100);
  }
  throw new Error(`fixture: job ${id} never reached ${states}`);
}

const ctx = {};
let unique = 0;
const fresh = (prefix) => `${prefix}-${process.pid}-${++unique}`;

async function submit(body, token) {
  return (await must('POST', '/v1/jobs', body, token, 201)).id;
}

// A running job of this name from an earlier setup (dredd's, before the
// Prism driver's), else a new one.
async function running(name, body) {
  const list = await must('GET', '/v1/jobs?state=RUNNING&limit=1000');
  const found = list.jobs.find((j) => j.name === name);
  return found ? found.id : submit(Object.assign({name}, body));
}
const hpcJob = (script) => ({workload: {kind: 'hpc'}, resources: {cpus: 1, memory_mb: 64},
  command: ['/bin/sh', '-c', script]});
// Waits behind the blocker, which holds every GPU of gpu-train-pool.
const gpuJob = () => ({workload: {kind: 'ai-training'}, resources: {gpus: 1, cpus: 1, memory_mb: 64},
  command: ['/bin/true']});

// The objects the answers need, made once per process.
async function setup() {
  if (ctx.ready) return ctx;
  await must('POST', '/v1/users', {name: 'alice', role: 'user', projects: ['default']});
  ctx.alice = (await must('POST', '/v1/users/alice/tokens', {name: 'conformance'})).token;
  ctx.node = (await must('POST', '/v1/node-tokens', {pool: 'agent-pool'})).token;
  await heartbeat();
  ctx.jobDone = await submit(hpcJob('echo hello'));
  ctx.jobRunning = await running('conformance-running', hpcJob('sleep 600'));
  ctx.blocker = await running('conformance-blocker', {workload: {kind: 'ai-training'}, resources: {nodes: 2, gpus: 8, cpus: 1, memory_mb: 64},
    command: ['/bin/sh', '-c', 'sleep 600']});
  ctx.agentJob = await running('conformance-agent', {queue: 'agent-batch', workload: {kind: 'hpc'}, resources: {cpus: 1, memory_mb: 64},
    command: ['/bin/echo', 'hi']});
  await waitJob(ctx.jobDone, ['COMPLETED']);
  await waitJob(ctx.jobRunning, ['RUNNING']);
  await waitJob(ctx.blocker, ['RUNNING']);
  ctx.step = (await must('POST', `/v1/jobs/${ctx.jobRunning}/steps`, {command: ['/bin/true']}, ADMIN, 201)).step;
  // The agent job is launched to the agent node at its next heartbeat.
  for (let i = 0; i < 100 && (await must('GET', `/v1/jobs/${ctx.agentJob}`)).state !== 'RUNNING'; ++i) {
    await heartbeat();
    await sleep(100);
  }
  await waitJob(ctx.agentJob, ['RUNNING'], 5);
  ctx.pending = await submit(gpuJob());
  ctx.sandbox = (await must('POST', '/v1/sandboxes', {}, ADMIN, 201)).id;
  await must('PUT', `/v1/sandboxes/${ctx.sandbox}/files/out%2Fresult.json`, '{"answer": 42}');
  await must('POST', `/v1/sandboxes/${ctx.sandbox}/exec`, {argv: ['/bin/sh', '-c', 'head -c 70000 /dev/zero > big.bin']});
  ctx.ended = (await must('POST', '/v1/sandboxes', {}, ADMIN, 201)).id;
  await must('DELETE', `/v1/sandboxes/${ctx.ended}`);
  ctx.baseline = (await must('POST', '/v1/baselines', baselineBody(), ADMIN, 201)).id;
  await call('POST', '/v1/secrets', {name: 'conformance-secret', value: 'not-a-real-secret'});  // 409 on a rerun
  ctx.secretCount = 0;
  ctx.workflow = (await must('POST', '/v1/workflows', workflowBody('true'), ADMIN, 201)).id;
  await waitWorkflow(ctx.workflow, ['SUCCEEDED']);
  ctx.workflowCount = 0;
  ctx.ready = true;
  return ctx;
}

// A workflow of one task running `script`, then a second after it.
function workflowBody(script) {
  return {name: 'conformance', project: 'default', tasks: [
    {name: 'first', job: hpcJob(script)},
    {name: 'second', after: ['first'], job: hpcJob('true')}]};
}

async function waitWorkflow(id, states, seconds = 60) {
  for (let i = 0; i < seconds * 10; ++i) {
    const w = await must('GET', `/v1/workflows/${id}`);
    if (states.includes(w.state)) return w;
    await sleep(100);
  }
  throw new Error(`fixture: workflow ${id} never reached ${states}`);
}

// A workflow cancelled while its first task sleeps.
async function cancelledWorkflow() {
  const id = (await must('POST', '/v1/workflows', workflowBody('sleep 600'), ADMIN, 201)).id;
  await must('DELETE', `/v1/workflows/${id}`);
  return id;
}

function heartbeat(extra = {}) {
  return must('POST', '/v1/agents/heartbeat', Object.assign(
    {node: AGENT_NODE, pool: 'agent-pool', resources: {cpus: 4, memory_mb: 8192}, wait_ms: 0}, extra), ctx.node);
}

function baselineBody() {
  return {pools: ['cpu-hpc-pool'],
    figures: [{name: 'dgemm_gflops', pool: 'cpu-hpc-pool', value: 1.5, unit: 'GFLOP/s', better: 'higher'}]};
}

// A token whose rate allows one request, spent: its next request is 429.
async function spentToken(node) {
  const options = {requests_per_second: 0.001, burst: 1};
  if (node) {
    const token = (await must('POST', '/v1/node-tokens', Object.assign({pool: 'agent-pool'}, options))).token;
    await must('POST', '/v1/agents/results', {node: AGENT_NODE, results: []}, token);
    return token;
  }
  const token = (await must('POST', '/v1/users/alice/tokens', options)).token;
  await must('GET', '/v1/whoami', undefined, token);
  return token;
}

async function configText() {
  return (await must('GET', '/v1/config')).text;
}

// The current config with agent-batch's wall-time limit changed: a live change.
async function changedConfig() {
  const config = yaml.load(await configText());
  const queue = config.queues.find((q) => q.name === 'agent-batch');
  queue.policy = Object.assign({}, queue.policy || {}, {max_walltime_hours: 1 + (++unique % 100)});
  return yaml.dump(config);
}

const bad = 'the request breaks the document on purpose';

// The request for one answer (status, media type) of operation `id`.
async function prepare(id, status, mediaType, refused = false) {
  await setup();
  const node = ctx.node;
  const admin = ADMIN;
  const other = (op) => (op === 'node' ? admin : node);  // a token of the wrong kind: 403
  const s = Number(status);
  const job = (jid, rest = '') => `/v1/jobs/${jid}${rest}`;
  const sb = (sid, rest = '') => `/v1/sandboxes/${sid}${rest}`;
  const malformed = {body: '{"unterminated": ', invalid: `${bad}: a body that is not JSON (400 malformed_json)`};

  // Answers no single healthy daemon gives (docs/testing.md).
  if (s === 503) return {skip: 'needs the store unreachable, a replica starting or standing by, or the daemon stopping'};
  if (s === 500) return {skip: 'needs an image whose bind target vanished after registration (internal error)'};
  if (s === 501) return {skip: 'needs daemon replicas on PostgreSQL (docs/replicas.md)'};
  if (s === 401) return Object.assign(await prepare(id, successOf(id), null, true), {token: WRONG_TOKEN});
  if (s === 429) {
    const r = await prepare(id, successOf(id), null, true);
    return Object.assign(r, {token: await spentToken(accessOf(id) === 'node')});
  }
  if (s === 403 && !['submitJob', 'createSandbox', 'createToken', 'listTokens', 'revokeToken'].includes(id)) {
    const r = await prepare(id, successOf(id), null, true);
    // Platform-admin operations refuse a user; the others a token of the wrong kind.
    return Object.assign(r, {token: accessOf(id) === 'platform-admin' ? ctx.alice : other(accessOf(id))});
  }

  switch (id) {
    case 'getConsole': return {path: '/'};
    case 'getConsoleFile':
      if (s === 200 && /^text\/css/.test(mediaType || '')) return {path: '/console/app.css'};
      if (s === 200) return {path: '/console/app.js'};
      if (s === 404) return {path: '/console/nope.js'};
      break;
    case 'getHealthz': return {path: '/healthz'};
    case 'getReadyz': return {path: '/readyz'};
    case 'getMetrics': return {path: '/metrics'};

    case 'submitJob':
      if (s === 201) return {};  // the document's example
      if (s === 403) return {token: ctx.alice, body: {project: 'physics', workload: {kind: 'hpc'}, command: ['true']}};
      if (s === 413) return {body: {workload: {kind: 'hpc'}, command: ['true'], env: {BIG: 'x'.repeat(1100000)}}};
      if (s === 422) return {body: {workload: {kind: 'hpc'}, command: ['true'], queue: 'no-such-queue'}};
      if (s === 400) return malformed;
      break;
    case 'listJobs':
      if (s === 200) return {query: {limit: 10}};
      if (s === 400) return {query: {limit: 'ten'}, invalid: `${bad}: limit is not a number`};
      if (s === 422) return {query: {limit: 1001}, invalid: `${bad}: limit above its maximum (1000)`};
      break;
    case 'getJob':
      if (s === 200) return {path: job(ctx.jobDone)};
      if (s === 404) return {path: job(999999)};
      break;
    case 'cancelJob':
      if (s === 200) return {path: job(await submit(hpcJob('sleep 600')))};
      if (s === 404) return {path: job(999999)};
      if (s === 409) return {path: job(ctx.jobDone)};
      break;
    case 'getJobLog':
      // follow=true: the header X-Unisched-Attempt is there (a job that ended: at once).
      if (s === 200) return {path: job(ctx.jobDone, '/log'), query: {stream: 'stdout', follow: 'true'}};
      if (s === 404) return {path: job(999999, '/log')};
      if (s === 409) return {path: job(ctx.pending, '/log'), query: {node: 'x86-c32m512g8-train-01'}};
      if (s === 422) return {path: job(ctx.jobDone, '/log'), query: {stream: 'both'}, invalid: `${bad}: stream not among its values`};
      if (s === 400) return {path: job(ctx.jobDone, '/log'), query: {attempt: 'first'}, invalid: `${bad}: attempt is not a number`};
      break;
    case 'startJobStep':
      if (s === 201) return {path: job(ctx.jobRunning, '/steps'), body: {command: ['/bin/true']}};
      if (s === 404) return {path: job(999999, '/steps'), body: {command: ['/bin/true']}};
      if (s === 409) return {path: job(ctx.jobDone, '/steps'), body: {command: ['/bin/true']}};
      if (s === 422) return {path: job(ctx.jobRunning, '/steps'), body: {command: ['/bin/true'], nodes: 2}};
      if (s === 400) return Object.assign({path: job(ctx.jobRunning, '/steps')}, malformed);
      break;
    case 'getJobStep':
      if (s === 200) return {path: job(ctx.jobRunning, `/steps/${ctx.step}`)};
      if (s === 404) return {path: job(ctx.jobRunning, '/steps/999999')};
      break;
    case 'getJobEvents':
      if (s === 200) return {path: job(ctx.jobDone, '/events')};
      if (s === 404) return {path: job(999999, '/events')};
      break;
    case 'holdJob':
      if (s === 200) return {path: job(await submit(gpuJob()), '/hold')};
      if (s === 404) return {path: job(999999, '/hold')};
      if (s === 409) return {path: job(ctx.jobDone, '/hold')};
      break;
    case 'requeueJob':
      // A job that has started or still waits: 200 either way (docs/slurm.md).
      if (s === 200) return {path: job(await submit(hpcJob('sleep 600')), '/requeue')};
      if (s === 404) return {path: job(999999, '/requeue')};
      if (s === 409) return {path: job(ctx.jobDone, '/requeue')};
      break;
    case 'updateJob':
      if (s === 200) return {path: job(await submit(gpuJob())), body: {resources: {walltime_seconds: 600}, priority: -1}};
      if (s === 404) return {path: job(999999), body: {priority: -1}};
      if (s === 409) return {path: job(ctx.jobDone), body: {priority: -1}};
      if (s === 422) return {path: job(await submit(gpuJob())), body: {queue: 'no-such-queue'}};
      if (s === 400) return Object.assign({path: job(ctx.pending)}, malformed);
      break;
    case 'releaseJob':
      if (s === 200) {
        const held = await submit(gpuJob());
        await must('POST', job(held, '/hold'));
        return {path: job(held, '/release')};
      }
      if (s === 404) return {path: job(999999, '/release')};
      if (s === 409) return {path: job(ctx.jobDone, '/release')};
      break;

    case 'getPendingReport':
      if (s === 200) return {path: '/v1/reports/pending', query: {limit: '5'}};
      if (s === 422) return {path: '/v1/reports/pending', query: {limit: '0'}, invalid: `${bad}: limit below its minimum (1)`};
      if (s === 400) return {path: '/v1/reports/pending', query: {limit: 'ten'}, invalid: `${bad}: limit is not a number`};
      break;
    case 'getCapacityReport':
      if (s === 200) return {path: '/v1/reports/capacity', query: {target_headroom_percent: '20'}};
      if (s === 422) return {path: '/v1/reports/capacity', query: {target_headroom_percent: '95'}, invalid: `${bad}: target above its maximum (90)`};
      if (s === 400) return {path: '/v1/reports/capacity', query: {to: 'now'}, invalid: `${bad}: to is not RFC 3339`};
      break;
    case 'getCostReport':
      if (s === 200) return {path: '/v1/reports/cost', query: {top: '3'}};
      if (s === 422) return {path: '/v1/reports/cost', query: {top: '0'}, invalid: `${bad}: top below its minimum (1)`};
      if (s === 400) return {path: '/v1/reports/cost', query: {from: 'yesterday'}, invalid: `${bad}: from is not RFC 3339`};
      break;
    case 'listPools': return {path: '/v1/pools'};
    case 'listQueues': return {path: '/v1/queues'};
    case 'listNodes': return {path: '/v1/nodes'};
    case 'drainNode':
      if (s === 200) {
        await call('POST', '/v1/nodes/x86-c64m256-hpc-04/resume');
        return {path: '/v1/nodes/x86-c64m256-hpc-04/drain'};
      }
      if (s === 404) return {path: '/v1/nodes/no-such-node/drain'};
      if (s === 422) return {path: '/v1/nodes/x86-c64m256-hpc-04/drain', body: {reason: 'r'.repeat(1025)},
        invalid: `${bad}: reason longer than its maxLength (1024)`};
      if (s === 400) return Object.assign({path: '/v1/nodes/x86-c64m256-hpc-04/drain'}, malformed);
      break;
    case 'resumeNode':
      if (s === 200) {
        if (!refused) await call('POST', '/v1/nodes/x86-c64m256-hpc-03/drain', {reason: 'conformance'});
        return {path: '/v1/nodes/x86-c64m256-hpc-03/resume'};
      }
      if (s === 404) return {path: '/v1/nodes/no-such-node/resume'};
      break;

    case 'createUser':
      if (s === 201) return {};  // the document's example
      if (s === 409) return {body: {name: 'admin', role: 'user', projects: ['default']}};
      if (s === 422) return {body: {name: 'bob', role: 'user', projects: ['no-such-project']}};
      if (s === 400) return malformed;
      break;
    case 'listUsers': return {path: '/v1/users'};
    case 'listUnixIds': return {path: '/v1/unix-ids'};
    case 'createToken':
      if (s === 201) return {path: '/v1/users/alice/tokens', body: {name: 'ci', expires_in_seconds: 3600}};
      if (s === 403) return {path: '/v1/users/admin/tokens', token: ctx.alice, body: {}};
      if (s === 404) return {path: '/v1/users/nobody/tokens', body: {}};
      if (s === 422) return {path: '/v1/users/alice/tokens', body: {allow_from: ['not-an-address']}};
      if (s === 400) return Object.assign({path: '/v1/users/alice/tokens'}, malformed);
      break;
    case 'listTokens':
      if (s === 200) return {path: '/v1/users/alice/tokens', token: ctx.alice};
      if (s === 403) return {path: '/v1/users/admin/tokens', token: ctx.alice};
      if (s === 404) return {path: '/v1/users/nobody/tokens'};
      break;
    case 'revokeToken':
      if (s === 200) {
        const t = await must('POST', '/v1/users/alice/tokens', {name: 'to-revoke'});
        return {path: `/v1/users/alice/tokens/${t.id}`};
      }
      if (s === 403) return {path: `/v1/users/admin/tokens/${NO_SUCH_TOKEN_ID}`, token: ctx.alice};
      if (s === 404) return {path: `/v1/users/alice/tokens/${NO_SUCH_TOKEN_ID}`};
      break;
    case 'listAudit':
      if (s === 200) return {path: '/v1/audit', query: {limit: 10}};
      if (s === 400) return {path: '/v1/audit', query: {limit: 'ten'}, invalid: `${bad}: limit is not a number`};
      if (s === 422) return {path: '/v1/audit', query: {limit: 0}, invalid: `${bad}: limit below its minimum (1)`};
      break;
    case 'whoami': return {path: '/v1/whoami'};

    case 'getUsage':
      if (s === 200) {
        return {path: '/v1/usage', query: {group_by: 'project,queue', format: /^text\/csv/.test(mediaType || '') ? 'csv' : 'json'},
          headers: {Accept: mediaType || 'application/json'}};
      }
      if (s === 400) return {path: '/v1/usage', query: {from: 'yesterday'}, invalid: `${bad}: from is not RFC 3339`};
      if (s === 422) return {path: '/v1/usage', query: {group_by: 'colour'}, invalid: `${bad}: group_by not among its values`};
      break;
    case 'reconcileUsage': return {path: '/v1/usage/reconcile'};
    case 'runStorageLifecycle':
      if (s === 200) return {path: '/v1/storage/lifecycle/run', query: {dry_run: 'true'}};
      if (s === 422) return {path: '/v1/storage/lifecycle/run', query: {dry_run: 'maybe'}, invalid: `${bad}: dry_run not among its values`};
      if (s === 400) return {path: '/v1/storage/lifecycle/run', query: {dry_run: '%FF'}, invalid: `${bad}: dry_run is not UTF-8`};
      break;
    case 'listEvents':
      if (s === 200) return {path: '/v1/events', query: {limit: 10}};
      if (s === 400) return {path: '/v1/events', query: {limit: 'ten'}, invalid: `${bad}: limit is not a number`};
      if (s === 422) return {path: '/v1/events', query: {limit: 10001}, invalid: `${bad}: limit above its maximum (10000)`};
      break;

    case 'createNodeToken':
      if (s === 201) return {path: '/v1/node-tokens', body: {pool: 'gpu-train-pool'}};
      if (s === 422) return {path: '/v1/node-tokens', body: {pool: 'no-such-pool'}};
      if (s === 400) return Object.assign({path: '/v1/node-tokens'}, malformed);
      break;
    case 'listNodeTokens': return {path: '/v1/node-tokens'};
    case 'revokeNodeToken':
      if (s === 200) return {path: `/v1/node-tokens/${(await must('POST', '/v1/node-tokens', {pool: 'agent-pool'})).id}`};
      if (s === 404) return {path: `/v1/node-tokens/${NO_SUCH_TOKEN_ID}`};
      break;
    case 'agentHeartbeat': {
      const body = {node: AGENT_NODE, pool: 'agent-pool', resources: {cpus: 4, memory_mb: 8192},
        running: [{job: Number(ctx.agentJob), attempt: 1}], wait_ms: 0};
      if (s === 200) return {token: node, body};
      if (s === 404) return {token: node, body: Object.assign({}, body, {node: 'x86-no-such-agent'})};
      if (s === 400) return Object.assign({token: node}, malformed);
      break;
    }
    case 'agentResults':
      if (s === 200) return {token: node, body: {node: AGENT_NODE, results: []}};
      if (s === 404) return {token: node, body: {node: 'x86-no-such-agent', results: []}};
      if (s === 400) return Object.assign({token: node}, malformed);
      break;
    case 'agentLogs': {
      const query = {node: AGENT_NODE, job: ctx.agentJob, attempt: 1, stream: 'stdout', offset: 0};
      const octets = {'Content-Type': 'application/octet-stream'};
      // The task's first bytes (a repeat, from a second run, writes nothing: 200 too).
      if (s === 200) return {token: node, query, headers: octets, body: 'hi\n'};
      if (s === 404) return {token: node, query: Object.assign({}, query, {job: '999999'}), headers: octets, body: 'x'};
      if (s === 422) return {token: node, query: Object.assign({}, query, {attempt: 0}), headers: octets, body: 'x',
        invalid: `${bad}: attempt below its minimum (1)`};
      if (s === 400) return {token: node, query: Object.assign({}, query, {offset: 'start'}), headers: octets, body: 'x',
        invalid: `${bad}: offset is not a number`};
      break;
    }
    case 'listAlerts':
      if (s === 200) return {path: '/v1/alerts', query: {state: 'firing'}};
      if (s === 422) return {path: '/v1/alerts', query: {state: 'burning'}, invalid: `${bad}: state not among its values`};
      if (s === 400) return {path: '/v1/alerts', query: {state: '%FF'}, invalid: `${bad}: state is not UTF-8`};
      break;

    case 'createSandbox':
      if (s === 201) return {};  // the document's example
      if (s === 403) return {token: ctx.alice, body: {project: 'physics'}};
      if (s === 422) return {body: {project: 'no-such-project'}};
      if (s === 400) return malformed;
      break;
    case 'listSandboxes':
      if (s === 200) return {path: '/v1/sandboxes', query: {all: 'true'}};
      if (s === 422) return {path: '/v1/sandboxes', query: {all: 'yes'}, invalid: `${bad}: all not among its values`};
      if (s === 400) return {path: '/v1/sandboxes', query: {all: '%FF'}, invalid: `${bad}: all is not UTF-8`};
      break;
    case 'getSandbox':
      if (s === 200) return {path: sb(ctx.sandbox)};
      if (s === 404) return {path: sb('sb-999999')};
      break;
    case 'deleteSandbox':
      if (s === 200 && refused) return {path: sb(ctx.sandbox)};
      if (s === 200) return {path: sb((await must('POST', '/v1/sandboxes', {}, admin, 201)).id)};
      if (s === 404) return {path: sb('sb-999999')};
      if (s === 409) return {path: sb(ctx.ended)};
      break;
    case 'execSandbox':
      if (s === 200) return {path: sb(ctx.sandbox, '/exec')};  // the document's example
      if (s === 404) return {path: sb('sb-999999', '/exec'), body: {argv: ['true']}};
      if (s === 409) return {path: sb(ctx.ended, '/exec'), body: {argv: ['true']}};
      if (s === 422) return {path: sb(ctx.sandbox, '/exec'), body: {argv: ['true'], env: {'A=B': 'c'}}};
      if (s === 400) return Object.assign({path: sb(ctx.sandbox, '/exec')}, malformed);
      break;
    case 'putSandboxFile': {
      const octets = {'Content-Type': 'application/octet-stream'};
      if (s === 200) return {path: sb(ctx.sandbox, '/files/out%2Fresult.json'), headers: octets, body: '{"answer": 42}'};
      if (s === 404) return {path: sb('sb-999999', '/files/a.txt'), headers: octets, body: 'x'};
      if (s === 409) return {path: sb(ctx.ended, '/files/a.txt'), headers: octets, body: 'x'};
      if (s === 413) return {path: sb(ctx.sandbox, '/files/big.txt'), headers: octets, body: 'x'.repeat(70000)};
      if (s === 422) return {path: sb(ctx.sandbox, '/files/..%2Fescape.txt'), headers: octets, body: 'x'};
      break;
    }
    case 'getSandboxFile':
      if (s === 200) return {path: sb(ctx.sandbox, '/files/out%2Fresult.json')};
      if (s === 404) return {path: sb(ctx.sandbox, '/files/no-such-file')};
      if (s === 409) return {path: sb(ctx.ended, '/files/a.txt')};
      if (s === 413) return {path: sb(ctx.sandbox, '/files/big.bin')};
      if (s === 422) return {path: sb(ctx.sandbox, '/files/out')};  // a directory
      break;

    case 'listImages': return {path: '/v1/images'};
    case 'createImage': {
      const images = (await must('GET', '/v1/images')).images;
      const taken = (name, version) => images.some((i) => i.name === name && i.versions.some((v) => v.version === version));
      const ex = example(spec.paths['/v1/images'].post);
      if (s === 201) return taken(ex.name, ex.version) ? {body: Object.assign({}, ex, {version: fresh('v')})} : {};
      if (s === 409) return {body: {name: 'host', version: '1'}};
      if (s === 422) return {body: {name: 'python', version: fresh('v'), rootfs: '/no/such/dir'}};
      if (s === 400) return malformed;
      break;
    }
    case 'rollbackImage':
      if (s === 200) {
        const name = fresh('img');
        await must('POST', '/v1/images', {name, version: '1'}, admin, 201);
        await must('POST', '/v1/images', {name, version: '2'}, admin, 201);
        return {path: `/v1/images/${name}/rollback`};
      }
      if (s === 404) return {path: '/v1/images/no-such-image/rollback'};
      if (s === 409) return {path: '/v1/images/host/rollback'};
      break;

    case 'showConfig':
      if (s === 200) return {path: '/v1/config'};
      if (s === 404) return {path: '/v1/config', query: {version: 999999}};
      if (s === 422) return {path: '/v1/config', query: {version: 0}, invalid: `${bad}: version below its minimum (1)`};
      if (s === 400) return {path: '/v1/config', query: {version: 'last'}, invalid: `${bad}: version is not a number`};
      break;
    case 'applyConfig':
      if (s === 200) return {path: '/v1/config', query: {dry_run: 'true'}, body: {text: await changedConfig()}};
      if (s === 201) return {path: '/v1/config', body: {text: await changedConfig(), comment: 'conformance'}};
      if (s === 409) {
        const config = yaml.load(await configText());
        config.queues = config.queues.filter((q) => q.name !== 'agent-batch');
        return {path: '/v1/config', body: {text: yaml.dump(config)}};
      }
      if (s === 422) return {path: '/v1/config', body: {text: 'pools: [unterminated'}};
      if (s === 400) return Object.assign({path: '/v1/config'}, malformed);
      break;
    case 'listConfigVersions':
      if (s === 200) return {path: '/v1/config/versions', query: {limit: 10}};
      if (s === 422) return {path: '/v1/config/versions', query: {limit: 0}, invalid: `${bad}: limit below its minimum (1)`};
      if (s === 400) return {path: '/v1/config/versions', query: {limit: 'ten'}, invalid: `${bad}: limit is not a number`};
      break;
    case 'rollbackConfig':
      if (s === 200) {
        await must('POST', '/v1/config', {text: await changedConfig()}, admin, 201);
        return {path: '/v1/config/rollback', body: {}};
      }
      if (s === 404) return {path: '/v1/config/rollback', body: {version: 999999}};
      if (s === 409) return {skip: 'needs a daemon whose config has only one version (every run here has stored more)'};
      if (s === 422) return {path: '/v1/config/rollback', body: {version: 0}, invalid: `${bad}: version below its minimum (1)`};
      if (s === 400) return Object.assign({path: '/v1/config/rollback'}, malformed);
      break;
    case 'promoteConfig':
      if (s === 200 && !refused) {
        await must('POST', '/v1/config', {text: await changedConfig(), canary_queue: 'agent-batch'}, admin, 201);
        return {path: '/v1/config/promote'};
      }
      if (s === 409 || refused) return {path: '/v1/config/promote'};
      break;

    case 'recordBaseline':
      if (s === 201) return {path: '/v1/baselines', body: baselineBody()};
      if (s === 403) return {path: '/v1/baselines', token: ctx.alice, body: baselineBody()};
      if (s === 422) return {path: '/v1/baselines', body: Object.assign(baselineBody(), {pools: ['no-such-pool']})};
      if (s === 400) return Object.assign({path: '/v1/baselines'}, malformed);
      break;
    case 'listBaselines':
      if (s === 200) return {path: '/v1/baselines', query: {limit: 5}};
      if (s === 422) return {path: '/v1/baselines', query: {limit: 0}, invalid: `${bad}: limit below its minimum (1)`};
      if (s === 400) return {path: '/v1/baselines', query: {limit: 'ten'}, invalid: `${bad}: limit is not a number`};
      break;
    case 'getBaseline':
      if (s === 200) return {path: `/v1/baselines/${ctx.baseline}`};
      if (s === 404) return {path: '/v1/baselines/999999'};
      break;

    case 'createSecret': {
      const fresh = {name: `conformance-${Date.now()}-${++ctx.secretCount}`, value: 'not-a-real-secret'};
      if (s === 201) return {path: '/v1/secrets', body: fresh};
      if (s === 409) return {path: '/v1/secrets', body: {name: 'conformance-secret', value: 'v'}};
      if (s === 422) return {path: '/v1/secrets', body: Object.assign(fresh, {project: 'no-such-project'})};
      if (s === 400) return Object.assign({path: '/v1/secrets'}, malformed);
      break;
    }
    case 'listSecrets':
      if (s === 200) return {path: '/v1/secrets', query: {project: 'default'}};
      if (s === 422) return {path: '/v1/secrets', query: {project: 'p'.repeat(300)}, invalid: `${bad}: project longer than 256`};
      if (s === 400) return {skip: 'needs a project that is not UTF-8, which no JSON-Schema states (tests/integration/status_rule_test.cc sends one)'};
      break;
    case 'getSecret':
      if (s === 200) return {path: '/v1/secrets/default/conformance-secret'};
      if (s === 404) return {path: '/v1/secrets/default/no-such-secret'};
      break;
    case 'rotateSecret':
      if (s === 200) return {path: '/v1/secrets/default/conformance-secret', body: {value: 'rotated'}};
      if (s === 404) return {path: '/v1/secrets/default/no-such-secret', body: {value: 'v'}};
      if (s === 422) return {path: '/v1/secrets/default/conformance-secret', body: {value: 'v', versions: 2}};
      if (s === 400) return Object.assign({path: '/v1/secrets/default/conformance-secret'}, malformed);
      break;
    case 'deleteSecret':
      if (s === 200) {
        const name = `conformance-gone-${Date.now()}-${++ctx.secretCount}`;
        await must('POST', '/v1/secrets', {name, value: 'v'}, admin, 201);
        return {path: `/v1/secrets/default/${name}`};
      }
      if (s === 404) return {path: '/v1/secrets/default/no-such-secret'};
      break;
    case 'createWorkflow':
      if (s === 201) return {body: workflowBody('true')};
      if (s === 422) return {body: {tasks: [{name: 'a', after: ['no-such-task'], job: hpcJob('true')}]}};
      if (s === 400) return malformed;
      break;
    case 'listWorkflows':
      if (s === 200) return {path: '/v1/workflows', query: {limit: 10}};
      if (s === 400) return {path: '/v1/workflows', query: {limit: 'ten'}, invalid: `${bad}: limit is not a number`};
      if (s === 422) return {path: '/v1/workflows', query: {limit: 0}, invalid: `${bad}: limit below its minimum (1)`};
      break;
    case 'getWorkflow':
      if (s === 200 && /^text\/vnd.graphviz/.test(mediaType || '')) return {path: `/v1/workflows/${ctx.workflow}`, query: {format: 'dot'}};
      if (s === 200 && /^text\/plain/.test(mediaType || '')) return {path: `/v1/workflows/${ctx.workflow}`, query: {format: 'mermaid'}};
      if (s === 200) return {path: `/v1/workflows/${ctx.workflow}`};
      if (s === 404) return {path: '/v1/workflows/999999'};
      if (s === 422) return {path: `/v1/workflows/${ctx.workflow}`, query: {format: 'svg'}, invalid: `${bad}: format not among its choices`};
      if (s === 400) return {skip: 'needs a format that is not UTF-8, which no JSON-Schema states (tests/integration/status_rule_test.cc sends one)'};
      break;
    case 'cancelWorkflow':
      if (s === 200) return {path: `/v1/workflows/${(await must('POST', '/v1/workflows', workflowBody('sleep 600'), ADMIN, 201)).id}`};
      if (s === 404) return {path: '/v1/workflows/999999'};
      if (s === 409) return {path: `/v1/workflows/${ctx.workflow}`};
      break;
    case 'resumeWorkflow':
      if (s === 200 && !refused) return {path: `/v1/workflows/${await cancelledWorkflow()}/resume`};
      if (s === 200 || s === 409) return {path: `/v1/workflows/${ctx.workflow}/resume`};
      if (s === 404) return {path: '/v1/workflows/999999/resume'};
      break;
    case 'addWorkflowTasks': {
      const task = {name: `added-${Date.now()}-${++ctx.workflowCount}`, job: hpcJob('true')};
      if (s === 200) {
        const fresh = (await must('POST', '/v1/workflows', workflowBody('true'), ADMIN, 201)).id;
        return {path: `/v1/workflows/${fresh}/tasks`, body: {tasks: [task]}};
      }
      if (s === 404) return {path: '/v1/workflows/999999/tasks', body: {tasks: [task]}};
      if (s === 409) return {path: `/v1/workflows/${await cancelledWorkflow()}/tasks`, body: {tasks: [task]}};
      if (s === 422) return {path: `/v1/workflows/${ctx.workflow}/tasks`, body: {tasks: [Object.assign(task, {after: ['no-such-task']})]}};
      if (s === 400) return Object.assign({path: `/v1/workflows/${ctx.workflow}/tasks`}, malformed);
      break;
    }
  }
  return {unknown: `no request for ${id} ${status} ${mediaType || ''}`};
}

// Every operation's first 2xx status, and its access rule.
const byId = () => Object.fromEntries(operations().map((o) => [o.id, o]));
function successOf(id) { return byId()[id].answers.map((a) => a.status).find((st) => st[0] === '2'); }
function accessOf(id) { return byId()[id].op['x-access']; }

// The request's target: path with its query string.
function target(id, req) {
  const op = byId()[id];
  let path = req.path || op.path;
  const q = req.query ? Object.entries(req.query).map(([k, v]) => `${k}=${String(v).startsWith('%') ? v : encodeURIComponent(v)}`).join('&') : '';
  return q ? `${path}?${q}` : path;
}

// The request's headers and body as sent (body undefined: the example).
function wire(id, req) {
  const op = byId()[id];
  const headers = Object.assign({}, req.headers || {});
  const token = req.token === undefined ? ADMIN : req.token;
  if (token && op.op.security === undefined) headers.Authorization = 'Bearer ' + token;
  let body = req.body;
  if (body === undefined && ['POST', 'PUT'].includes(op.method)) body = example(op.op);
  if (body !== undefined && typeof body !== 'string') {
    body = JSON.stringify(body);
  }
  if (body !== undefined && !headers['Content-Type']) headers['Content-Type'] = 'application/json';
  return {method: op.method, target: target(id, req), headers, body};
}

module.exports = {operations, jsonSchema, responseSchema, resolve, prepare, setup, wire, spec, ctx, ADMIN};
