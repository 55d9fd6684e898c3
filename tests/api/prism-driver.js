// Drives every operation of docs/openapi.yaml and each answer it documents
// through a Prism validating proxy (`prism proxy --errors`) in front of the
// daemon (scripts/api-conformance.sh; requests from tests/api/cases.js).
//
// A request the document allows must come back with the documented status,
// untouched by Prism: with --errors Prism answers a response that breaks the
// document with its own problem+json instead, and the log names the
// violation. A request that breaks the document on purpose (the daemon's 400
// answers, and 422 for a value out of the document's bounds) must be refused
// by Prism itself, before the daemon: the document states what the daemon
// refuses. Fails on any violation, on any operation not covered, and on any
// answer without a request.
'use strict';

const fs = require('fs');
const cases = require('./cases');

const PRISM = process.env.CONFORMANCE_PRISM_URL;
const LOG = process.env.CONFORMANCE_PRISM_LOG;
const verbose = process.env.CONFORMANCE_VERBOSE === '1';

let logAt = 0;
// Prism's log since the last call: the lines that report violations, and
// whether it passed the request on to the daemon.
function newLog() {
  const text = fs.readFileSync(LOG, 'utf8');
  const added = text.slice(logAt).split('\n');
  logAt = text.length;
  return {violations: added.filter((l) => /violation/i.test(l) && !/Request terminated/.test(l)),
    forwarded: added.some((l) => /Forwarding/.test(l))};
}

async function main() {
  await cases.setup();
  newLog();
  const failures = [];
  const skipped = [];
  let forwarded = 0;
  let refused = 0;
  const covered = new Set();
  const ops = cases.operations();
  for (const o of ops) {
    const seen = new Set();
    for (const {status, mediaType} of o.answers) {
      const key = `${status} ${mediaType}`;
      if (seen.has(key)) continue;
      seen.add(key);
      const name = `${o.id} ${status}${mediaType ? ' ' + mediaType : ''}`;
      let req;
      try {
        req = await cases.prepare(o.id, status, mediaType);
      } catch (e) {
        failures.push(`${name}: preparing the request failed: ${e.message}`);
        continue;
      }
      if (req.skip) {
        skipped.push(`${name}: ${req.skip}`);
        continue;
      }
      if (req.unknown) {
        failures.push(`${name}: ${req.unknown}`);
        continue;
      }
      const w = cases.wire(o.id, req);
      if (mediaType) w.headers.Accept = mediaType;
      let res;
      let text;
      try {
        res = await fetch(PRISM + w.target, {method: w.method, headers: w.headers, body: w.body});
        text = await res.text();
      } catch (e) {
        failures.push(`${name}: ${w.method} ${w.target}: ${e.message}`);
        continue;
      }
      const contentType = res.headers.get('content-type') || '';
      // Give Prism's log a moment to be written.
      await new Promise((r) => setTimeout(r, 20));
      const log = newLog();
      const fromPrism = !log.forwarded || /problem\+json/.test(contentType) ||
        /stoplight\.io\/prism\/errors/.test(text);
      const violations = log.violations;
      if (res.headers.get('sl-violations')) violations.push(`sl-violations: ${res.headers.get('sl-violations')}`);
      const line = `${name}: ${w.method} ${w.target} -> ${res.status}`;
      if (verbose) console.log(line);
      if (req.invalid) {
        // Refused by Prism itself: its problem+json, naming what is wrong.
        if (!fromPrism || res.status < 400) {
          failures.push(`${line}: the request breaks the document (${req.invalid}) but Prism passed it on: ` +
            `the document does not state what the daemon refuses\n    ${text.slice(0, 300)}`);
        } else {
          refused++;
        }
        continue;
      }
      if (fromPrism || violations.length || String(res.status) !== status) {
        failures.push(`${line} (expected ${status})${fromPrism ? ' (answered by Prism)' : ''}\n    ` +
          `${text.slice(0, 600)}${violations.length ? '\n    ' + violations.join('\n    ') : ''}`);
        continue;
      }
      if (mediaType && !contentType.startsWith(mediaType.split(';')[0])) {
        failures.push(`${line}: Content-Type ${contentType}, the document says ${mediaType}`);
        continue;
      }
      if (/json/.test(mediaType || '') && status[0] !== '2' && !(JSON.parse(text).error || {}).code) {
        failures.push(`${line}: an error answer without {"error": {"code", "message"}}: ${text.slice(0, 200)}`);
        continue;
      }
      forwarded++;
      if (status[0] === '2') covered.add(o.id);
    }
  }
  const missing = ops.filter((o) => !covered.has(o.id)).map((o) => o.id);
  for (const m of missing) failures.push(`${m}: no 2xx answer of it went through Prism`);
  console.log(`prism: ${covered.size} of ${ops.length} operations covered; ${forwarded} answers through Prism with ` +
    `no violation, ${refused} requests that break the document on purpose refused by Prism, ` +
    `${skipped.length} answers skipped, ${failures.length} failures`);
  if (skipped.length) console.log(`skipped (no single healthy daemon gives these answers):\n  ${skipped.join('\n  ')}`);
  if (failures.length) {
    console.log(`FAILED:\n  ${failures.join('\n  ')}`);
    process.exitCode = 1;
  }
}

main().catch((e) => {
  console.error(e.stack);
  process.exitCode = 1;
});
