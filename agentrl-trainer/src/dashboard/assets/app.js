// AgentRL dashboard: a single page over the JSON API of `agentrl dashboard`.
// Hash routes: #/, #/run/NAME, #/run/NAME/episodes?..., #/run/NAME/episode/SOURCE/INDEX,
// #/compare?runs=a,b&metric=m. Charts are plain SVG drawn here. All data goes into the DOM
// through textContent or attributes (never innerHTML): model output is untrusted.
'use strict';

const view = document.getElementById('view');
const crumbs = document.getElementById('crumbs');
const SVG_NS = 'http://www.w3.org/2000/svg';
const COLORS = ['#2f6fde', '#d9480f', '#2b8a3e', '#ae3ec9', '#e8590c', '#0c8599', '#c2255c',
  '#5c940d', '#1864ab', '#862e9c'];
const POLL_MS = 2500;
let timers = [];
let routeId = 0;

// ---------- helpers ----------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else if (key === 'class') node.className = value;
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = String(text);
  return node;
}

function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }

async function api(path) {
  const response = await fetch(path, { cache: 'no-store' });
  let body = null;
  try { body = await response.json(); } catch (e) { body = null; }
  if (!response.ok) throw new Error((body && body.error) || response.status + ' ' + response.statusText);
  return body;
}

function runApi(name) { return '/api/runs/' + encodeURIComponent(name); }
function runHash(name) { return '#/run/' + encodeURIComponent(name); }

function fmt(x, digits = 4) {
  if (typeof x !== 'number' || !isFinite(x)) return x === undefined || x === null ? '–' : String(x);
  if (Number.isInteger(x)) return String(x);
  return String(Number(x.toFixed(digits)));
}

function pct(x) { return typeof x === 'number' ? (100 * x).toFixed(1) + '%' : '–'; }

function badge(status) {
  const state = (status && status.state) || 'unknown';
  const text = status && status.detail && state === 'failed' && status.detail === 'interrupted'
    ? 'failed (interrupted)' : state;
  return el('span', { class: 'badge state-' + state, 'data-testid': 'run-status',
    title: (status && status.detail) || '' }, text);
}

function every(ms, fn) { timers.push(setInterval(fn, ms)); }

function showError(error) {
  view.appendChild(el('p', { class: 'error', 'data-testid': 'error' }, String(error.message || error)));
}

function setCrumbs(...links) {
  clear(crumbs);
  append(crumbs, links.map(([text, href]) => href ? el('a', { href }, text) : el('span', {}, text)));
}

// ---------- routing ----------

function parseHash() {
  const hash = location.hash.replace(/^#\/?/, '');
  const [path, query] = hash.split('?');
  const parts = path.split('/').filter(p => p !== '').map(decodeURIComponent);
  return { parts, params: new URLSearchParams(query || '') };
}

function route() {
  timers.forEach(clearInterval);
  timers = [];
  routeId += 1;
  const { parts, params } = parseHash();
  clear(view);
  let page;
  if (parts.length === 0) page = runList();
  else if (parts[0] === 'run' && parts.length === 2) page = runView(parts[1], params);
  else if (parts[0] === 'run' && parts[2] === 'episodes') page = episodeBrowser(parts[1], params);
  else if (parts[0] === 'run' && parts[2] === 'episode' && parts.length === 5)
    page = episodeView(parts[1], parts[3], Number(parts[4]));
  else if (parts[0] === 'compare') page = compareView(params);
  else page = Promise.reject(new Error('no such page: ' + location.hash));
  page.catch(showError);
}

window.addEventListener('hashchange', route);
route();

// ---------- run list ----------

async function runList() {
  setCrumbs(['runs']);
  const me = routeId;
  const table = el('table', { id: 'runs-table' });
  const selected = new Set();
  const compare = el('button', { id: 'compare-button', onclick: () => {
    if (selected.size) location.hash = '#/compare?runs=' + [...selected].map(encodeURIComponent).join(',');
  } }, 'Compare selected runs');
  append(view, [el('h1', {}, 'Runs'), table, el('div', { class: 'controls' }, compare)]);
  async function refresh() {
    const { runs } = await api('/api/runs');
    if (me !== routeId) return;
    clear(table);
    table.appendChild(el('tr', {}, ['', 'run', 'status', 'step', 'success (RL)', 'reward (RL)',
      'last eval', 'modified', ''].map(h => el('th', {}, h))));
    if (runs.length === 0) table.appendChild(el('tr', {}, el('td', { colspan: 9, class: 'muted' }, 'No runs in this folder yet.')));
    for (const run of runs) table.appendChild(runRow(run, selected));
  }
  await refresh();
  every(5000, () => refresh().catch(() => {}));
}

function runRow(run, selected) {
  const rl = run.last.rl_step || {};
  const ev = run.last.eval;
  const box = el('input', { type: 'checkbox', checked: selected.has(run.name), onchange: e => {
    if (e.target.checked) selected.add(run.name); else selected.delete(run.name);
  } });
  const modified = run.modified_unix ? new Date(run.modified_unix * 1000).toLocaleString() : '–';
  return el('tr', { 'data-testid': 'run-row', 'data-run': run.name },
    el('td', {}, box),
    el('td', {}, el('a', { href: runHash(run.name), 'data-testid': 'run-name' }, run.name)),
    el('td', {}, badge(run.status)),
    el('td', {}, run.last_step ?? '–'),
    el('td', {}, pct(rl.success_rate)),
    el('td', {}, fmt(rl.reward_mean)),
    el('td', {}, ev ? `${ev.label || 'eval'}: ${pct(ev.success_rate)}` : '–'),
    el('td', { class: 'muted' }, modified),
    el('td', {}, el('a', { href: runHash(run.name) + '/episodes' }, 'episodes')));
}

// ---------- metrics store (live, by byte offset) ----------

const stores = new Map();

function metricsStore(name) {
  if (!stores.has(name)) stores.set(name, { records: [], offset: 0 });
  return stores.get(name);
}

// Reads new records of run `name`; true when some arrived.
async function pullMetrics(name) {
  const store = metricsStore(name);
  let grew = false;
  for (;;) {
    const chunk = await api(runApi(name) + '/metrics?since=' + store.offset);
    if (chunk.next_offset < store.offset) store.records = [];
    store.offset = chunk.next_offset;
    if (chunk.records.length) { store.records.push(...chunk.records); grew = true; }
    if (!chunk.more) return grew;
  }
}

function metricOptions(records) {
  const keys = new Set();
  for (const r of records) {
    const kind = r.kind || 'record';
    for (const [k, v] of Object.entries(r)) if (typeof v === 'number' && k !== 'step') keys.add(kind + '/' + k);
    if (r.per_task && typeof r.per_task === 'object') {
      for (const task of Object.values(r.per_task)) {
        for (const [k, v] of Object.entries(task || {})) if (typeof v === 'number') keys.add(kind + '/per_task.' + k);
      }
    }
  }
  return [...keys].sort();
}

function defaultMetric(records) {
  const rl = records.filter(r => r.kind === 'rl_step');
  const envs = new Set();
  rl.forEach(r => Object.keys(r.per_task || {}).forEach(e => envs.add(e)));
  if (envs.size > 1) return 'rl_step/per_task.success_rate';
  if (rl.length) return 'rl_step/success_rate';
  if (records.some(r => r.kind === 'sft_step')) return 'sft_step/loss';
  return metricOptions(records)[0] || '';
}

// Series {name, points: [[step, value]]} of `metric` over `records`.
function metricSeries(records, metric, prefix) {
  const slash = metric.indexOf('/');
  const kind = metric.slice(0, slash);
  const key = metric.slice(slash + 1);
  const series = new Map();
  const add = (name, x, y) => {
    if (typeof y !== 'number' || !isFinite(y)) return;
    if (!series.has(name)) series.set(name, []);
    series.get(name).push([x, y]);
  };
  records.forEach((r, i) => {
    if ((r.kind || 'record') !== kind) return;
    const x = typeof r.step === 'number' ? r.step : i;
    if (key.startsWith('per_task.')) {
      const sub = key.slice('per_task.'.length);
      for (const [env, task] of Object.entries(r.per_task || {})) add(env, x, task && task[sub]);
    } else add('', x, r[key]);
  });
  return [...series.entries()].map(([name, points]) => ({
    name: [prefix, name].filter(Boolean).join(' · ') || key, points }));
}

// ---------- SVG line chart ----------

function niceTicks(lo, hi, count) {
  const span = hi - lo || 1;
  const raw = span / count;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map(m => m * mag).find(s => s >= raw) || raw;
  const ticks = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push(Number(t.toFixed(10)));
  return ticks;
}

function drawChart(container, seriesList, yLabel) {
  clear(container);
  const all = seriesList.flatMap(s => s.points);
  if (all.length === 0) {
    container.appendChild(el('p', { class: 'muted', 'data-testid': 'chart-empty' }, 'No data for this metric yet.'));
    return;
  }
  const W = 900, H = 360, L = 60, R = 20, T = 16, B = 40;
  let [x0, x1] = [Math.min(...all.map(p => p[0])), Math.max(...all.map(p => p[0]))];
  let [y0, y1] = [Math.min(...all.map(p => p[1])), Math.max(...all.map(p => p[1]))];
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  if (y0 === y1) { y0 -= 0.5; y1 += 0.5; }
  const pad = (y1 - y0) * 0.05; y0 -= pad; y1 += pad;
  const sx = x => L + (x - x0) / (x1 - x0) * (W - L - R);
  const sy = y => H - B - (y - y0) / (y1 - y0) * (H - T - B);
  const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, id: 'chart-svg', 'data-testid': 'chart-svg',
    role: 'img', 'aria-label': yLabel });
  for (const t of niceTicks(y0, y1, 6)) {
    root.appendChild(svg('line', { class: 'grid', x1: L, x2: W - R, y1: sy(t), y2: sy(t) }));
    root.appendChild(svg('text', { x: L - 6, y: sy(t) + 4, 'text-anchor': 'end' }, fmt(t, 3)));
  }
  for (const t of niceTicks(x0, x1, 8)) {
    root.appendChild(svg('line', { class: 'axis', x1: sx(t), x2: sx(t), y1: H - B, y2: H - B + 4 }));
    root.appendChild(svg('text', { x: sx(t), y: H - B + 16, 'text-anchor': 'middle' }, fmt(t, 2)));
  }
  root.appendChild(svg('line', { class: 'axis', x1: L, x2: W - R, y1: H - B, y2: H - B }));
  root.appendChild(svg('line', { class: 'axis', x1: L, x2: L, y1: T, y2: H - B }));
  root.appendChild(svg('text', { x: (L + W - R) / 2, y: H - 6, 'text-anchor': 'middle' }, 'step'));
  root.appendChild(svg('text', { x: L + 6, y: T + 4 }, yLabel));
  const legend = el('div', { class: 'legend', 'data-testid': 'chart-legend' });
  seriesList.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    const points = [...s.points].sort((a, b) => a[0] - b[0]);
    const d = points.map((p, j) => (j ? 'L' : 'M') + sx(p[0]).toFixed(1) + ' ' + sy(p[1]).toFixed(1)).join(' ');
    root.appendChild(svg('path', { class: 'line', d, stroke: color, 'data-testid': 'chart-line',
      'data-series': s.name }));
    if (points.length <= 60) {
      for (const p of points) {
        const dot = svg('circle', { cx: sx(p[0]), cy: sy(p[1]), r: 2.5, fill: color });
        dot.appendChild(svg('title', {}, `${s.name} step ${p[0]}: ${fmt(p[1])}`));
        root.appendChild(dot);
      }
    }
    legend.appendChild(el('span', { style: '--swatch:' + color }, s.name));
  });
  container.appendChild(root);
  container.appendChild(legend);
}

// ---------- run view ----------

async function runView(name, params) {
  setCrumbs(['runs', '#/'], [name]);
  const me = routeId;
  const [detail, list] = await Promise.all([api(runApi(name)), api('/api/runs')]);
  const overlays = (params.get('overlay') || '').split(',').filter(Boolean);
  const shown = [name, ...overlays];
  await Promise.all(shown.map(pullMetrics));
  if (me !== routeId) return;
  let metric = params.get('metric') || defaultMetric(metricsStore(name).records);
  const picker = el('select', { id: 'metric-picker', onchange: e => setParam('metric', e.target.value) });
  const chart = el('div', { class: 'chart', id: 'chart' });
  const evalBox = el('div', { id: 'eval' });
  const statusBox = el('span', {}, badge(detail.status));
  const others = list.runs.map(r => r.name).filter(n => n !== name);
  const overlayBox = el('div', { class: 'controls', id: 'overlay-picker' },
    others.length ? 'Overlay runs:' : null,
    others.map(o => el('label', {}, el('input', { type: 'checkbox', checked: overlays.includes(o),
      onchange: e => setParam('overlay', (e.target.checked ? [...overlays, o] : overlays.filter(x => x !== o)).join(',')) }), o)));
  function setParam(key, value) {
    const next = new URLSearchParams(params);
    if (key !== 'metric') next.set('metric', metric);
    if (value) next.set(key, value); else next.delete(key);
    location.hash = runHash(name) + '?' + next.toString();
  }
  function redraw() {
    const options = new Set(shown.flatMap(n => metricOptions(metricsStore(n).records)));
    if (!metric) metric = defaultMetric(metricsStore(name).records);
    if (metric) options.add(metric);
    clear(picker);
    for (const o of [...options].sort()) picker.appendChild(el('option', { value: o, selected: o === metric }, o));
    const series = shown.flatMap(n => metricSeries(metricsStore(n).records, metric, shown.length > 1 ? n : ''));
    drawChart(chart, series, metric);
    renderEvals(evalBox, metricsStore(name).records);
  }
  append(view, [
    el('h1', {}, name, statusBox),
    el('div', { class: 'controls' },
      el('a', { href: runHash(name) + '/episodes', id: 'episodes-link' }, 'Browse episodes'),
      el('label', {}, 'Metric', picker)),
    overlayBox, chart,
    el('h2', {}, 'Held-out evaluations'), evalBox,
    detail.summary ? el('details', { class: 'card' }, el('summary', {}, 'summary.json'),
      el('pre', {}, JSON.stringify(detail.summary, null, 2))) : null,
    el('details', { class: 'card', id: 'config' }, el('summary', {}, 'config.toml'),
      el('pre', {}, detail.config || '(no config.toml)')),
  ]);
  redraw();
  every(POLL_MS, async () => {
    const grew = (await Promise.all(shown.map(n => pullMetrics(n).catch(() => false)))).some(Boolean);
    if (me === routeId && grew) redraw();
  });
  every(5000, async () => {
    const fresh = await api(runApi(name)).catch(() => null);
    if (fresh && me === routeId) { clear(statusBox); statusBox.appendChild(badge(fresh.status)); }
  });
}

function renderEvals(box, records) {
  clear(box);
  const evals = records.filter(r => r.kind === 'eval');
  if (evals.length === 0) { box.appendChild(el('p', { class: 'muted' }, 'No evaluation yet.')); return; }
  for (const ev of evals) {
    const table = el('table', { 'data-testid': 'eval-table', 'data-label': ev.label || '' },
      el('tr', {}, ['env', 'episodes', 'success', '95% interval', 'reward', 'turns', 'tool calls']
        .map(h => el('th', {}, h))));
    const rows = Object.entries(ev.per_task || {});
    for (const [env, t] of rows) table.appendChild(evalRow(env, t));
    if (rows.length !== 1) table.appendChild(evalRow('all', { ...ev, episodes: ev.tasks, turns_mean: ev.mean_turns }));
    append(box, [el('h3', {}, `${ev.label || 'eval'} (step ${ev.step ?? '–'})`), table]);
  }
}

function evalRow(env, t) {
  const interval = typeof t.success_low === 'number' ? `[${pct(t.success_low)}, ${pct(t.success_high)}]` : '–';
  return el('tr', {}, el('td', {}, env), el('td', {}, t.episodes ?? '–'), el('td', {}, pct(t.success_rate)),
    el('td', {}, interval), el('td', {}, fmt(t.reward_mean)), el('td', {}, fmt(t.turns_mean, 2)),
    el('td', {}, fmt(t.tool_calls_per_episode, 2)));
}

// ---------- compare ----------

async function compareView(params) {
  setCrumbs(['runs', '#/'], ['compare']);
  const me = routeId;
  const runs = (params.get('runs') || '').split(',').filter(Boolean);
  if (runs.length === 0) throw new Error('pick runs to compare on the run list');
  await Promise.all(runs.map(pullMetrics));
  if (me !== routeId) return;
  const metric = params.get('metric') || defaultMetric(metricsStore(runs[0]).records);
  const options = new Set(runs.flatMap(n => metricOptions(metricsStore(n).records)));
  const picker = el('select', { id: 'metric-picker', onchange: e => {
    location.hash = '#/compare?runs=' + runs.map(encodeURIComponent).join(',') + '&metric=' + encodeURIComponent(e.target.value);
  } }, [...options].sort().map(o => el('option', { value: o, selected: o === metric }, o)));
  const chart = el('div', { class: 'chart', id: 'chart' });
  const draw = () => drawChart(chart, runs.flatMap(n => metricSeries(metricsStore(n).records, metric, n)), metric);
  append(view, [el('h1', {}, 'Compare ', runs.join(', ')), el('div', { class: 'controls' }, el('label', {}, 'Metric', picker)), chart]);
  draw();
  every(POLL_MS, async () => {
    const grew = (await Promise.all(runs.map(n => pullMetrics(n).catch(() => false)))).some(Boolean);
    if (me === routeId && grew) draw();
  });
}

// ---------- episode browser ----------

const FILTERS = ['source', 'env', 'success', 'min_reward', 'max_reward', 'invalid', 'step_min', 'step_max'];

async function episodeBrowser(name, params) {
  setCrumbs(['runs', '#/'], [name, runHash(name)], ['episodes']);
  const me = routeId;
  const detail = await api(runApi(name));
  if (me !== routeId) return;
  if (!params.has('source')) {
    const preferred = detail.sources.find(s => s.label.startsWith('eval')) || detail.sources[0];
    if (preferred) params.set('source', preferred.name);
  }
  const offset = Number(params.get('offset') || 0);
  const inputs = {
    source: el('select', { id: 'source-picker' }, el('option', { value: '' }, 'all step samples'),
      detail.sources.map(s => el('option', { value: s.name, selected: s.name === params.get('source') },
        `${s.name} (${(s.size / 1048576).toFixed(1)} MiB)`))),
    env: el('select', { id: 'env-filter' }, el('option', { value: '' }, 'any env')),
    success: el('select', { id: 'success-filter' }, ['', 'true', 'false'].map(v =>
      el('option', { value: v, selected: v === (params.get('success') || '') }, v === '' ? 'any' : v === 'true' ? 'solved' : 'failed'))),
    min_reward: el('input', { type: 'number', step: 'any', value: params.get('min_reward') || '' }),
    max_reward: el('input', { type: 'number', step: 'any', value: params.get('max_reward') || '' }),
    invalid: el('input', { type: 'checkbox', id: 'invalid-filter', checked: params.get('invalid') === 'true' }),
    step_min: el('input', { type: 'number', value: params.get('step_min') || '' }),
    step_max: el('input', { type: 'number', value: params.get('step_max') || '' }),
  };
  const go = (nextOffset) => {
    const next = new URLSearchParams();
    for (const key of FILTERS) {
      const input = inputs[key];
      const value = input.type === 'checkbox' ? (input.checked ? 'true' : '') : input.value;
      if (value !== '') next.set(key, value);
    }
    if (!next.has('source')) next.set('source', '');
    if (nextOffset) next.set('offset', nextOffset);
    location.hash = runHash(name) + '/episodes?' + next.toString();
  };
  const counts = el('p', { id: 'episode-counts', 'data-testid': 'index-state' }, 'indexing…');
  const table = el('table', { id: 'episodes-table' });
  const pager = el('div', { class: 'pager' });
  const notes = el('div', { class: 'muted' });
  append(view, [el('h1', {}, 'Episodes of ', el('a', { href: runHash(name) }, name)),
    el('div', { class: 'controls' },
      el('label', {}, 'Source', inputs.source), el('label', {}, 'Env', inputs.env),
      el('label', {}, 'Outcome', inputs.success), el('label', {}, 'Reward ≥', inputs.min_reward),
      el('label', {}, '≤', inputs.max_reward), el('label', {}, inputs.invalid, 'invalid actions only'),
      el('label', { title: 'only when no single source is chosen' }, 'Steps', inputs.step_min, '–', inputs.step_max),
      el('button', { id: 'apply-filters', onclick: () => go(0) }, 'Apply')),
    counts, table, pager, notes]);
  const query = new URLSearchParams();
  for (const key of FILTERS) if (params.get(key)) query.set(key, params.get(key));
  query.set('offset', offset);
  query.set('limit', 50);
  async function load() {
    const page = await api(runApi(name) + '/episodes?' + query.toString());
    if (me !== routeId) return true;
    renderEpisodePage(name, page, { inputs, counts, table, pager, notes, params, go });
    return page.index_complete;
  }
  if (!(await load())) {
    const timer = setInterval(async () => {
      const done = await load().catch(() => true);
      if (done) clearInterval(timer);
    }, 1500);
    timers.push(timer);
  }
}

function renderEpisodePage(name, page, ui) {
  const { inputs, counts, table, pager, notes, params, go } = ui;
  const wanted = params.get('env') || '';
  clear(inputs.env).appendChild(el('option', { value: '' }, 'any env'));
  for (const env of new Set([...page.envs, wanted].filter(Boolean))) {
    inputs.env.appendChild(el('option', { value: env, selected: env === wanted }, env));
  }
  const first = page.total_matching ? page.offset + 1 : 0;
  const last = page.offset + page.episodes.length;
  counts.textContent = `episodes ${first}–${last} of ${page.total_matching} matching` +
    (page.index_complete ? ` (${page.indexed_episodes} episodes indexed)`
      : ` so far — indexing… (${page.indexed_episodes} episodes indexed)`);
  clear(table).appendChild(el('tr', {}, ['#', 'source', 'env', 'task', 'solved', 'reward', 'outcome',
    'turns', 'tool calls', 'invalid', 'policy'].map(h => el('th', {}, h))));
  for (const e of page.episodes) {
    const href = runHash(name) + '/episode/' + encodeURIComponent(e.source) + '/' + e.index;
    const policy = 'v' + e.policy_versions.join(',v') + (e.policy_names.length ? ' ' + e.policy_names.join(',') : '');
    table.appendChild(el('tr', { 'data-testid': 'episode-row' },
      el('td', {}, el('a', { href }, e.index)), el('td', { class: 'muted' }, e.source), el('td', {}, e.env_id),
      el('td', {}, e.task_id), el('td', { class: e.success ? 'yes' : 'no' }, e.success ? '✓' : '✗'),
      el('td', {}, fmt(e.reward)), el('td', {}, e.outcome), el('td', {}, e.turns),
      el('td', {}, e.tool_calls + (e.tool_errors ? ` (${e.tool_errors} errors)` : '')),
      el('td', {}, e.invalid_actions || ''), el('td', { class: 'muted' }, policy)));
  }
  clear(pager);
  append(pager, [
    el('button', { id: 'prev-page', disabled: page.offset === 0, onclick: () => go(Math.max(0, page.offset - page.limit)) }, '← Prev'),
    el('button', { id: 'next-page', disabled: last >= page.total_matching && page.index_complete,
      onclick: () => go(page.offset + page.limit) }, 'Next →')]);
  clear(notes);
  if (page.bad_line_count) {
    notes.appendChild(el('p', {}, `${page.bad_line_count} malformed lines skipped: ` +
      page.bad_lines.slice(0, 5).map(b => `${b.source}:${b.line} (${b.error})`).join('; ')));
  }
  for (const error of page.errors || []) notes.appendChild(el('p', { class: 'error' }, error));
}

// ---------- episode view ----------

async function episodeView(name, source, index) {
  setCrumbs(['runs', '#/'], [name, runHash(name)], ['episodes', runHash(name) + '/episodes?source=' + encodeURIComponent(source)],
    [source + ' #' + index]);
  const ep = await api(runApi(name) + '/episodes/' + encodeURIComponent(source) + '/' + index);
  const base = runHash(name) + '/episode/' + encodeURIComponent(source) + '/';
  const turns = ep.turns || [];
  const parts = Object.entries(ep.reward_parts || {});
  append(view, [
    el('h1', {}, `${ep.env_id} · ${ep.task_id}`,
      el('span', { class: 'badge ' + (ep.success ? 'state-finished' : 'state-failed'), 'data-testid': 'episode-success' },
        ep.success ? 'solved' : 'not solved')),
    el('div', { class: 'controls' },
      index > 0 ? el('a', { href: base + (index - 1) }, '← previous episode') : null,
      el('a', { href: base + (index + 1) }, 'next episode →')),
    el('div', { class: 'card kv', id: 'episode-header' },
      el('span', {}, 'reward'), el('strong', { 'data-testid': 'episode-reward' }, fmt(ep.reward)),
      el('span', {}, 'outcome'), el('span', { 'data-testid': 'episode-outcome' }, ep.outcome),
      ep.score !== undefined ? [el('span', {}, 'score'), el('span', {}, fmt(ep.score))] : null,
      el('span', {}, 'split / group'), el('span', {}, `${ep.split} / ${ep.group_id}`),
      el('span', {}, 'turns'), el('span', {}, turns.length),
      el('span', {}, 'tool calls'), el('span', {}, `${ep.tool_calls || 0} (${ep.tool_errors || 0} errors)`)),
    parts.length ? el('table', { 'data-testid': 'reward-parts', style: 'width:auto' },
      el('tr', {}, el('th', {}, 'reward part'), el('th', {}, 'value')),
      parts.map(([k, v]) => el('tr', {}, el('td', {}, k), el('td', {}, fmt(v))))) : null,
    el('h2', {}, 'Conversation'),
    el('div', { id: 'messages' }, renderMessages(ep.messages || [], turns)),
    el('h2', {}, 'Turns'),
    renderTurns(turns),
    el('details', { class: 'card' }, el('summary', {}, 'raw JSON'), el('pre', {}, JSON.stringify(ep, null, 2))),
  ]);
}

function renderMessages(messages, turns) {
  let turn = 0;
  return messages.map(m => {
    const info = m.role === 'assistant' && turns[turn] ? turnInfo(turns[turn], turn++) : null;
    const node = el('div', { class: 'message role-' + m.role, 'data-testid': 'episode-message', 'data-role': m.role },
      el('span', { class: 'role' }, m.role), info,
      m.role === 'tool' ? el('span', { class: 'turn-info' }, 'result of ' + (m.tool_call_id || '?')) : null);
    if (m.content !== null && m.content !== undefined && m.content !== '') {
      node.appendChild(el('pre', m.role === 'tool' ? { 'data-testid': 'tool-result' } : {}, m.content));
    }
    for (const call of m.tool_calls || []) node.appendChild(renderToolCall(call));
    return node;
  });
}

function turnInfo(t, i) {
  const bits = [`turn ${i + 1}`, `policy v${t.policy_version}` + (t.policy_name ? ` (${t.policy_name})` : ''),
    `finish ${t.finish}`, `reward ${fmt(t.reward)}`];
  if (t.invalid_action) bits.push('invalid action: ' + t.invalid_action);
  if (t.stale) bits.push('stale: not trained');
  return el('span', { class: 'turn-info', 'data-testid': 'turn-info' }, bits.join(' · '));
}

function renderToolCall(call) {
  const fn = call.function || {};
  let args = fn.arguments;
  try { args = JSON.stringify(typeof args === 'string' ? JSON.parse(args) : args, null, 2); } catch (e) { /* shown raw */ }
  return el('div', { class: 'tool-call' },
    '→ ', el('span', { class: 'tool-call-name', 'data-testid': 'tool-call-name' }, fn.name || '?'),
    el('span', { class: 'muted' }, ' ' + (call.id || '')),
    el('pre', { 'data-testid': 'tool-call-args' }, args === undefined ? '' : String(args)));
}

function renderTurns(turns) {
  const box = el('div', { id: 'turns' });
  const tokens = el('div', { id: 'logprobs', hidden: true });
  const button = el('button', { id: 'toggle-logprobs', onclick: () => {
    if (!tokens.firstChild) turns.forEach((t, i) => tokens.appendChild(renderTokens(t, i)));
    tokens.hidden = !tokens.hidden;
    button.textContent = tokens.hidden ? 'Show token logprobs' : 'Hide token logprobs';
  } }, 'Show token logprobs');
  const table = el('table', {}, el('tr', {}, ['turn', 'policy', 'finish', 'generated', 'injected', 'reward', 'invalid action']
    .map(h => el('th', {}, h))));
  turns.forEach((t, i) => table.appendChild(el('tr', {}, el('td', {}, i + 1),
    el('td', {}, `v${t.policy_version}` + (t.policy_name ? ` ${t.policy_name}` : '') + (t.stale ? ' (stale)' : '')),
    el('td', {}, t.finish),
    el('td', {}, (t.generated_ids || []).length), el('td', {}, (t.injected_ids || []).length),
    el('td', {}, fmt(t.reward)), el('td', {}, t.invalid_action || ''))));
  return append(box, [table, el('div', { class: 'controls' }, button), tokens]);
}

function tokenText(id) {
  if (id === 10) return '↵';
  if (id >= 32 && id < 127) return String.fromCharCode(id);
  if (id < 256) return '\\x' + id.toString(16).padStart(2, '0');
  return '<' + id + '>';
}

function renderTokens(turn, i) {
  const ids = turn.generated_ids || [];
  const lps = turn.logprobs || [];
  const line = el('div', { class: 'tokens', 'data-testid': 'turn-tokens' }, el('strong', {}, `turn ${i + 1}: `));
  ids.forEach((id, j) => {
    const lp = lps[j];
    const p = typeof lp === 'number' ? Math.exp(lp) : 1;
    line.appendChild(el('span', { style: `background:hsl(${Math.round(120 * p)},70%,85%)`,
      title: `id ${id} · logprob ${fmt(lp)} · p ${fmt(p, 3)}` }, tokenText(id)));
  });
  return line;
}
