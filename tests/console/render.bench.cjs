// The console's jobs page, first render, with many jobs in the store
// (`make bench`, section console; docs/benchmarks.md): submits jobs until
// the store holds each count of CONSOLE_BENCH_COUNTS (the daemon's nodes are
// drained, so they wait), then loads the jobs page afresh RUNS times in
// Debian's Chromium and prints the median and worst time from navigation to
// the table drawn, one line per count.
'use strict';

const puppeteer = require('puppeteer-core');

const URL_BASE = process.env.CONSOLE_URL;
const ADMIN = process.env.CONSOLE_ADMIN_TOKEN;
const COUNTS = (process.env.CONSOLE_BENCH_COUNTS || '10000,100000').split(',').map(Number);
const RUNS = Number(process.env.CONSOLE_BENCH_RUNS || 7);

async function submitUpTo(target, have) {
  const body = JSON.stringify({workload: {kind: 'hpc'}, resources: {cpus: 1, memory_mb: 64}, command: ['true']});
  let next = have;
  const worker = async () => {
    while (next < target) {
      ++next;
      const r = await fetch(`${URL_BASE}/v1/jobs`, {method: 'POST', body,
        headers: {Authorization: `Bearer ${ADMIN}`, 'Content-Type': 'application/json'}});
      if (r.status !== 201) throw new Error(`submit answered ${r.status}: ${await r.text()}`);
    }
  };
  await Promise.all(Array.from({length: 32}, worker));
  return target;
}

async function main() {
  const browser = await puppeteer.launch({executablePath: process.env.CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage']});
  const page = await browser.newPage();
  await page.setViewport({width: 1280, height: 900});
  await page.goto(`${URL_BASE}/#/login`);
  await page.evaluate((t) => sessionStorage.setItem('unisched.token', t), ADMIN);
  let have = 0;
  for (const count of COUNTS) {
    const started = Date.now();
    have = await submitUpTo(count, have);
    const submitted = (Date.now() - started) / 1000;
    const times = [];
    for (let i = 0; i < RUNS; ++i) {
      const t0 = Date.now();
      await page.goto(`${URL_BASE}/?run=${count}-${i}#/jobs`);
      await page.waitForSelector('main tbody tr', {timeout: 60000});
      times.push(Date.now() - t0);
    }
    times.sort((a, b) => a - b);
    console.log(`  jobs page, first render with ${count} jobs in the store: median ${times[Math.floor(times.length / 2)]} ms, ` +
      `worst ${times[times.length - 1]} ms over ${RUNS} loads (jobs submitted up to it in ${submitted.toFixed(1)} s)`);
  }
  await browser.close();
}

main().catch((e) => {
  console.error(e.message);
  process.exit(1);
});
