// The web console in Debian's Chromium (scripts/console-test.sh sets the
// environment): what a user and an admin do with it, each page's
// accessibility (axe-core: no serious or critical violation), no request off
// this origin and no Content-Security-Policy violation, a screenshot of each
// page on a laptop and a phone. Exits 1 on the first failed check.
'use strict';

const fs = require('fs');
const path = require('path');
const puppeteer = require('puppeteer-core');

const URL_BASE = process.env.CONSOLE_URL;
const ARTIFACTS = process.env.CONSOLE_ARTIFACTS;
const AXE = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const PAGES = ['', 'jobs', 'nodes', 'queues', 'sandboxes', 'workflows', 'workflows/1', 'usage', 'reports', 'alerts'];

let checks = 0;
function check(ok, what) {
  ++checks;
  if (!ok) throw new Error(`failed: ${what}`);
  console.log(`ok ${checks} - ${what}`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  const page = await browser.newPage();
  await page.setViewport({width: 1280, height: 900});
  const problems = [];
  page.on('console', (m) => {
    if (/Content Security Policy|Refused to/.test(m.text())) problems.push(`CSP: ${m.text()}`);
    if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) problems.push(`console error: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('request', (r) => {
    if (!r.url().startsWith(URL_BASE) && !r.url().startsWith('data:') && !r.url().startsWith('blob:')) {
      problems.push(`a request off this origin: ${r.url()}`);
    }
  });
  // A fresh load of the page each time (the same hash twice would not reload it).
  let loads = 0;
  const shot = (name) => page.screenshot({path: path.join(ARTIFACTS, `${name}.png`), fullPage: true});
  const text = () => page.evaluate(() => document.getElementById('main').innerText);
  const waitText = async (want, ms = 30000) => {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      if ((await text()).includes(want)) return true;
      await sleep(100);
    }
    return false;
  };
  const go = async (hash) => {
    await page.goto(`${URL_BASE}/?load=${++loads}#/${hash}`);
    // Rendered: something in the page (before the script runs it is empty) and nothing loading.
    await page.waitForFunction(() => {
      const main = document.getElementById('main').innerText;
      return main.trim() !== '' && !main.includes('Loading') && !main.includes('加载中');
    }, {timeout: 30000});
  };
  const login = async (token) => {
    await page.evaluate(() => sessionStorage.clear());
    await page.goto(`${URL_BASE}/?load=${++loads}#/login`);
    await page.waitForSelector('input[name=token]');
    await page.type('input[name=token]', token);
    await Promise.all([page.waitForFunction(() => location.hash === '#/'), page.click('form.login button')]);
    await page.waitForFunction(() => document.querySelector('main h1') && !document.getElementById('main').innerText.includes('Loading'));
  };

  // The console is served with a strict policy and no inline script.
  const response = await page.goto(`${URL_BASE}/`);
  const csp = response.headers()['content-security-policy'] || '';
  check(/script-src 'self'/.test(csp) && !/unsafe-inline/.test(csp), `a strict Content-Security-Policy: ${csp}`);
  check(await page.evaluate(() => [...document.scripts].every((s) => s.src)), 'no inline script in the page');
  await page.waitForSelector('input[name=token]');
  await shot('login');

  // A wrong token is refused and kept nowhere.
  await page.type('input[name=token]', 'usk_wrong');
  await page.click('form.login button');
  check(await waitText('refused'), 'a wrong token is refused');
  check(await page.evaluate(() => !sessionStorage.getItem('unisched.token')), 'a refused token is not kept');

  // alice submits a job from the console and watches it finish.
  await login(process.env.CONSOLE_ALICE_TOKEN);
  check((await text()).includes('Pools'), 'the overview shows the pools');
  await go('jobs');
  const marker = `console-run-${Date.now()}`;
  await page.$eval('input[name=command]', (el) => { el.value = ''; });
  await page.type('input[name=command]', `echo ${marker}`);
  await Promise.all([page.waitForFunction(() => /^#\/jobs\/\d+/.test(location.hash)), page.click('form.submit button')]);
  const jobId = (await page.evaluate(() => location.hash)).split('/')[2];
  check(/^\d+$/.test(jobId), `the job was submitted (${jobId})`);
  check(await waitText(marker), 'its log shows its output');
  let done = false;
  for (let i = 0; i < 100 && !done; ++i) {
    await go(`jobs/${jobId}`);
    done = (await text()).includes('COMPLETED');
    if (!done) await sleep(300);
  }
  check(done, 'the job page shows it COMPLETED');
  await shot('job');

  // The same in Chinese.
  await page.select('#lang', 'zh-CN');
  await page.waitForFunction(() => document.getElementById('nav').innerText.includes('作业'));
  check(true, 'the console switches to Chinese');
  await go('jobs');
  await shot('jobs-zh-CN');
  await page.select('#lang', 'en');
  await page.waitForFunction(() => document.getElementById('nav').innerText.includes('Jobs'));

  // bob, of another project, does not see alice's job.
  await login(process.env.CONSOLE_BOB_TOKEN);
  await go(`jobs/${jobId}`);
  check(/Error|not found/i.test(await text()) && !(await text()).includes(marker), "another project's user cannot open the job");
  await go('jobs');
  check(!(await page.$(`a[href="#/jobs/${jobId}"]`)), "nor find it in the list");

  // The admin drains a node and resumes it.
  await login(process.env.CONSOLE_ADMIN_TOKEN);
  await go('nodes');
  const firstRow = 'tbody tr:first-child';
  const nodeName = await page.$eval(`${firstRow} td:first-child`, (td) => td.innerText);
  await page.click(`${firstRow} button`);
  await page.waitForFunction((n) => [...document.querySelectorAll('tbody tr')]
    .some((tr) => tr.innerText.includes(n) && tr.innerText.includes('drained')), {timeout: 15000}, nodeName);
  check(true, `the admin drains ${nodeName}`);
  await shot('nodes-drained');
  await page.click(`${firstRow} button`);
  await page.waitForFunction((n) => [...document.querySelectorAll('tbody tr')]
    .some((tr) => tr.innerText.includes(n) && !tr.innerText.includes('drained')), {timeout: 15000}, nodeName);
  check(true, `and resumes it`);

  // alice's workflow, drawn.
  await go('workflows/1');
  check(await page.$$eval('svg.graph g.node', (g) => g.length) === 4, 'the workflow graph draws its four tasks');

  // Usage in hours and the capacity report's curves, plotted (uPlot draws once the page is in).
  // Generous waits: under `ctest -j` the machine's two CPUs are shared with other suites.
  const drawn = (selector) => page.waitForSelector(selector, {timeout: 20000}).then(() => true, () => false);
  await go('usage');
  check(await page.$eval('select[name=metric]', (s) => s.selectedOptions[0].textContent) === 'CPU-hours',
    'usage is plotted in CPU-hours');
  check(await drawn('.chart .uplot'), 'the usage page draws its plot');
  // A job waiting on another (a dependency): the pending report names its reason and links it.
  const waiting = await page.evaluate(async (token) => {
    const post = async (body) => (await fetch('/v1/jobs', {method: 'POST', body: JSON.stringify(body),
      headers: {Authorization: `Bearer ${token}`, 'Content-Type': 'application/json'}})).json();
    const job = {workload: {kind: 'hpc'}, resources: {cpus: 1, memory_mb: 64}, command: ['sleep', '300']};
    const first = await post(job);
    const second = await post({...job, dependency: `afterok:${first.id}`});
    return [first.id, second.id];
  }, process.env.CONSOLE_ADMIN_TOKEN);
  const submitted = waiting[1];
  await go('reports');
  check(await drawn('.chart .uplot') && (await text()).includes('Target ceiling (75%)'),
    "the capacity report plots each pool's utilisation against the target's ceiling");
  let listed = false;
  for (let i = 0; i < 100 && !listed; ++i) {  // the report reads the last cycle's reasons
    if (i) {
      await sleep(300);
      await go('reports');
    }
    listed = await page.evaluate((id) => !!document.querySelector(`a[href="#/jobs/${id}"]`) &&
      document.getElementById('main').innerText.includes('Dependency'), submitted);
  }
  check(listed, `the pending report shows job ${submitted} waiting on its dependency`);
  // Both cancelled, and the sleeping one seen ended: a job's process outlives a daemon that stops.
  const ended = await page.evaluate(async (token, ids) => {
    const h = {Authorization: `Bearer ${token}`};
    for (const id of ids) await fetch(`/v1/jobs/${id}`, {method: 'DELETE', headers: h});
    for (let i = 0; i < 300; ++i) {
      const job = await (await fetch(`/v1/jobs/${ids[0]}`, {headers: h})).json();
      if (!['PENDING', 'HELD', 'RUNNING'].includes(job.state)) return true;
      await new Promise((ok) => setTimeout(ok, 100));
    }
    return false;
  }, process.env.CONSOLE_ADMIN_TOKEN, waiting);
  check(ended, `the jobs made for the pending report are cancelled (${waiting.join(', ')})`);

  // Every page: rendered, accessible, pictured on a laptop and a phone.
  for (const [viewport, suffix] of [[{width: 1280, height: 900}, ''], [{width: 390, height: 844, isMobile: true}, '-phone']]) {
    await page.setViewport(viewport);
    for (const p of PAGES) {
      await go(p);
      const name = (p || 'overview').replace('/', '-') + suffix;
      check(!/Error:/.test(await text()), `page ${name} renders without an error`);
      await shot(name);
      if (suffix) continue;
      await page.evaluate(AXE);
      const result = await page.evaluate(() => axe.run(document, {resultTypes: ['violations']}));
      const bad = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
      check(bad.length === 0, `axe: no serious violation on ${name}${bad.length ? `: ${bad.map((v) => `${v.id} (${v.nodes.length})`).join(', ')}` : ''}`);
    }
  }

  check(problems.length === 0, `no CSP violation, page error or off-origin request${problems.length ? `: ${problems.join('; ')}` : ''}`);
  await browser.close();
  console.log(`console-test: ${checks} checks passed; screenshots in ${ARTIFACTS}`);
}

main().catch((e) => {
  console.error(e.message);
  process.exit(1);
});
