// dredd's hooks (scripts/api-conformance.sh): dredd makes one transaction of
// every answer docs/openapi.yaml lists (operation x status x media type);
// these make each one's request (tests/api/cases.js: the objects it needs,
// its path, token and body) and give dredd the answer's JSON Schema, which
// dredd 14 does not derive from an OpenAPI 3 document itself (it would only
// compare the body's keys with an example). A transaction is skipped only
// where cases.js says why no single healthy daemon can give that answer.
'use strict';

const hooks = require('hooks');
const cases = require('./cases');

const ops = {};
for (const o of cases.operations()) ops[`${o.method} ${o.path}`] = o;
const skipped = [];

hooks.beforeAll((transactions, done) => {
  cases.setup().then(() => done(), (e) => {
    hooks.log(`setup failed: ${e.stack}`);
    for (const t of transactions) t.fail = `setup failed: ${e.message}`;
    done();
  });
});

hooks.beforeEach((t, done) => {
  const o = ops[`${t.request.method} ${t.origin.resourceName}`];
  const status = t.expected.statusCode;
  const mediaType = (t.origin.exampleName.split(' > ')[1] || '').trim() || null;
  if (!o) {
    t.fail = `no operation ${t.request.method} ${t.origin.resourceName} in the document`;
    return done();
  }
  cases.prepare(o.id, status, mediaType).then((req) => {
    if (req.skip) {
      t.skip = true;
      skipped.push(`${o.id} ${status}: ${req.skip}`);
      return done();
    }
    if (req.unknown) {
      t.fail = req.unknown;
      return done();
    }
    const w = cases.wire(o.id, req);
    t.request.uri = w.target;
    t.fullPath = w.target;
    t.request.headers = Object.assign({'User-Agent': t.request.headers['User-Agent']}, w.headers);
    if (mediaType) {
      t.request.headers.Accept = mediaType;
      // dredd names one media type per answer but expects the first one's.
      for (const h of Object.keys(t.expected.headers)) if (h.toLowerCase() === 'content-type') delete t.expected.headers[h];
      t.expected.headers['Content-Type'] = mediaType;
    }
    t.request.body = w.body === undefined ? '' : w.body;
    const schema = mediaType && /json/.test(mediaType) ? cases.responseSchema(o.op, status, mediaType) : null;
    if (schema) {
      t.expected.bodySchema = schema;
      delete t.expected.body;
    } else {
      // Text, CSV and bytes: no example can equal them; the afterEach check below.
      delete t.expected.body;
    }
    done();
  }, (e) => {
    t.fail = `preparing the request failed: ${e.stack}`;
    done();
  });
});

// The text answers: what they must hold.
hooks.after('/metrics > Prometheus metrics > 200 > text/plain; version=0.0.4; charset=utf-8', (t) => {
  if (!/^# (HELP|TYPE) unisched_/m.test(t.real.body)) t.fail = 'the metrics hold no unisched_ series';
});
hooks.afterEach((t) => {
  if (t.expected.statusCode === '200' && /\/log$/.test(t.origin.resourceName) && t.real && t.real.body !== 'hello\n') {
    t.fail = `the log of a job that echoed hello is ${JSON.stringify(t.real.body)}`;
  }
});

hooks.afterAll((transactions, done) => {
  if (skipped.length) hooks.log(`skipped (no single healthy daemon gives these answers):\n  ${skipped.join('\n  ')}`);
  done();
});
