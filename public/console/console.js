// The console's single page: sign-in, API keys, workspaces (usage chart + request log) and the
// playground (the Jobs and Live pages are in jobs.js and live.js). Talks to /console/api/* with the session cookie
// and the CSRF header; the playground calls the public API /v1/noise-suppressor/* directly with X-API-Key.
// All data goes into the page through textContent, never innerHTML.
'use strict';
(function () {
  const $ = (sel) => document.querySelector(sel);
  const API = 'api';
  // The public API lives next to /console on the same origin.
  const BASE = location.pathname.replace(/\/console(\/.*)?$/, '');

  const state = {
    csrf: null,
    meta: null,
    workspaces: [],
    keys: [],
    page: null,
    wsId: null,
    logOffset: 0,
    logLimit: 25,
    playground: { workspaceId: null, token: null, models: null, file: null, fileName: null, beforeBytes: null, recorder: null, afterUrl: null, beforeUrl: null, beforePeakDb: null, beforeDecoded: null },
  };

  // ---------------------------------------------------------------- helpers
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') node.className = v;
      else if (k === 'text') node.textContent = v;
      else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
      else if (k === 'dataset') Object.assign(node.dataset, v);
      else node.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children) if (c !== null && c !== undefined) node.append(c instanceof Node ? c : String(c));
    return node;
  }
  function show(node, on) { node.hidden = !on; }
  /**
   * Copies each column's heading onto its cells (data-label): on phones a row becomes a card whose cells flow as
   * "LABEL value" (cells with class nolabel show the value alone, cells with class wide take a line of their own).
   */
  function labelCells(table) {
    const labels = [...table.querySelectorAll('thead th')].map((th) => th.textContent.trim());
    for (const tr of table.querySelectorAll('tbody tr')) {
      [...tr.children].forEach((td, i) => { td.dataset.label = labels[i] || ''; });
    }
  }
  function setError(node, msg) { node.textContent = msg || ''; show(node, !!msg); }
  /**
   * A time as "Nov 28, 2:04 PM" in the reader's locale (the year only when it is not this year). The date and the
   * time each hold together (no-break spaces): a narrow table cell puts the time under the date, never breaks
   * either (the full form took three to five lines in the keys table).
   */
  function fmtTime(iso) {
    if (!iso) return '—';
    const d = new Date(iso);
    if (Number.isNaN(d.getTime())) return '—';
    const year = d.getFullYear() === new Date().getFullYear() ? {} : { year: 'numeric' };
    const day = d.toLocaleDateString(undefined, { month: 'short', day: 'numeric', ...year });
    const time = d.toLocaleTimeString(undefined, { hour: 'numeric', minute: '2-digit' });
    const whole = (text) => text.replace(/\s/g, '\u00a0');
    return `${whole(day)}, ${whole(time)}`;
  }
  function fmtNum(n) { return n === null || n === undefined ? 'custom' : Number(n).toLocaleString(); }

  class ApiError extends Error {
    constructor(status, type, message) { super(message); this.status = status; this.type = type; }
  }

  async function api(method, path, body) {
    const headers = { Accept: 'application/json' };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (method !== 'GET' && state.csrf) headers['X-CSRF-Token'] = state.csrf;
    const res = await fetch(`${API}/${path}`, {
      method, headers, credentials: 'same-origin', body: body === undefined ? undefined : JSON.stringify(body),
    });
    let data = null;
    try { data = await res.json(); } catch { /* empty */ }
    if (!res.ok) {
      const err = (data && data.error) || {};
      if (res.status === 401 && err.type === 'not_signed_in') signedOut();
      throw new ApiError(res.status, err.type || 'error', err.message || `HTTP ${res.status}`);
    }
    return data;
  }

  // ---------------------------------------------------------------- session
  function signedOut() {
    state.csrf = null;
    state.playground.token = null;
    state.playground.models = null;
    state.playground.workspaceId = null;
    clearTokenOnce();
    window.NSLivePage.leave();
    show($('#nav'), false);
    show($('#signout'), false);
    for (const p of document.querySelectorAll('.page')) show(p, false);
    show($('#page-signin'), true);
    $('#signin-secret').focus();
  }

  async function signedIn(csrf) {
    state.csrf = csrf;
    show($('#page-signin'), false);
    show($('#nav'), true);
    show($('#signout'), true);
    state.meta = await api('GET', 'meta');
    buildStaticOptions();
    route();
  }

  $('#signin-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    setError($('#signin-error'), '');
    try {
      const out = await api('POST', 'login', { secret: $('#signin-secret').value });
      $('#signin-secret').value = '';
      await signedIn(out.csrf_token);
    } catch (e) {
      setError($('#signin-error'), e.type === 'too_many_attempts' ? e.message : e.type === 'invalid_secret' ? 'Wrong admin secret.' : e.message);
    }
  });

  $('#signout').addEventListener('click', async () => {
    try { await api('POST', 'logout'); } catch { /* signed out anyway */ }
    if (location.hash) history.replaceState(null, '', location.pathname);
    signedOut();
  });

  // ---------------------------------------------------------------- routing
  const PAGES = ['keys', 'workspaces', 'playground', 'jobs', 'live'];
  // The Jobs page lives in jobs.js; it gets the helpers it shares with this file.
  const loadJobsPage = () => window.NSJobsPage.load({
    api, el, show, fmtTime, confirmDialog, refreshWorkspaces, labelCells, workspaces: () => state.workspaces,
  });
  // The Live page (live.js) streams the microphone with the playground's key.
  const loadLivePage = () => window.NSLivePage.load({
    api, el, show, fmtTime, refreshWorkspaces, fillWorkspaceSelect, fetchModels, fillModelSelect, workspaces: () => state.workspaces,
  });
  function route() {
    if (!state.csrf) return;
    const page = PAGES.includes(location.hash.slice(1)) ? location.hash.slice(1) : 'keys';
    state.page = page;
    // A new key's clear token is shown once: leaving the page forgets it.
    clearTokenOnce();
    // A live stream runs only while its page is shown.
    if (page !== 'live') window.NSLivePage.leave();
    for (const p of PAGES) show($(`#page-${p}`), p === page);
    for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.page === page);
    const load = { keys: loadKeysPage, workspaces: loadWorkspacesPage, playground: loadPlayground, jobs: loadJobsPage, live: loadLivePage }[page];
    load().catch((e) => console.error(e));
  }
  window.addEventListener('hashchange', route);

  function buildStaticOptions() {
    const scopes = $('#key-scopes');
    const defaults = state.meta.default_scopes || [];
    if (!scopes.childElementCount) {
      for (const s of state.meta.scopes) {
        const id = `scope-${s.scope.replace(/[^a-z0-9]/gi, '_')}`;
        // The keys CLI's default is ticked from the start (and reset() brings it back): a name alone makes a key.
        scopes.append(el('label', { for: id },
          el('input', { type: 'checkbox', id, value: s.scope, name: 'scopes', checked: defaults.includes(s.scope) }),
          el('code', { text: s.scope }), el('span', { class: 'muted', text: s.allows })));
      }
    }
    $('#key-scopes-hint').textContent = `(none ticked: ${defaults.join(', ')}, the keys CLI's default)`;
    // The options name the plan only (long texts were cut off in a closed select on phones); the limits of the
    // plan picked are spelled out under it.
    for (const sel of document.querySelectorAll('select.plan-select')) {
      if (sel.childElementCount) continue;
      for (const p of state.meta.plans) sel.append(el('option', { value: p.id, text: p.label }));
      sel.addEventListener('change', () => showPlanHint(sel));
      showPlanHint(sel);
    }
  }

  function planLimitsText(planId) {
    const p = state.meta.plans.find((x) => x.id === planId);
    if (!p) return '';
    const limits = `${fmtNum(p.requestsPerMinute)} requests/min per key · ${fmtNum(p.creditsPerMonth)} credits/month`;
    return p.custom ? `${limits}, unless custom limits are set` : limits;
  }

  /** The limits of the plan a select shows; under "Change plan" only when it differs from the current plan. */
  function showPlanHint(sel) {
    const hint = document.querySelector(`.plan-hint[data-for="${sel.id}"]`);
    if (!hint) return;
    const current = sel.id === 'ws-plan-select' ? sel.dataset.current : null;
    hint.textContent = sel.value && sel.value !== current ? planLimitsText(sel.value) : '';
  }

  async function refreshWorkspaces() {
    state.workspaces = (await api('GET', 'workspaces')).workspaces;
    if (!state.wsId || !state.workspaces.some((w) => w.id === state.wsId)) state.wsId = state.workspaces[0] ? state.workspaces[0].id : null;
    return state.workspaces;
  }

  function fillWorkspaceSelect(sel, { allOption, newOption, selected } = {}) {
    sel.textContent = '';
    if (allOption) sel.append(el('option', { value: '', text: 'All workspaces' }));
    for (const w of state.workspaces) sel.append(el('option', { value: w.id, text: `${w.name} (${w.plan_label})` }));
    if (newOption) sel.append(el('option', { value: '__new__', text: '+ New workspace…' }));
    if (selected !== undefined && [...sel.options].some((o) => o.value === selected)) sel.value = selected;
  }

  // ---------------------------------------------------------------- API keys
  async function loadKeysPage() {
    await refreshWorkspaces();
    const filter = $('#keys-filter-workspace');
    const keepFilter = filter.value;
    fillWorkspaceSelect(filter, { allOption: true, selected: keepFilter });
    const target = $('#key-workspace');
    fillWorkspaceSelect(target, { newOption: true, selected: target.value || state.wsId || '__new__' });
    if (!state.workspaces.length) target.value = '__new__';
    show($('#key-new-workspace'), target.value === '__new__');
    await renderKeys();
  }

  async function renderKeys() {
    const ws = $('#keys-filter-workspace').value;
    state.keys = (await api('GET', `keys${ws ? `?workspace=${encodeURIComponent(ws)}` : ''}`)).keys;
    const body = $('#keys-table tbody');
    body.textContent = '';
    for (const k of state.keys) {
      const revokeBtn = k.status === 'active'
        ? el('button', { type: 'button', class: 'link-danger revoke', dataset: { keyId: k.id }, text: 'Revoke', onclick: () => revokeKey(k) })
        : null;
      body.append(el('tr', { dataset: { keyId: k.id, prefix: k.prefix } },
        el('td', { class: 'nolabel key-name', text: k.name }),
        el('td', { class: 'mono nolabel', text: `${k.prefix}…` }),
        el('td', { class: 'nolabel', text: k.workspace_name }),
        el('td', { class: 'wide' }, ...k.scopes.map((s) => el('span', { class: 'scope-chip', text: s }))),
        // Addresses or CIDR ranges the key is limited to; none means any address.
        el('td', { class: 'wide ips' }, ...(k.allowed_ips.length
          ? k.allowed_ips.map((ip) => el('span', { class: 'mono ip', text: ip }))
          : [el('span', { class: 'muted', text: 'any' })])),
        el('td', { text: fmtTime(k.created_at) }),
        el('td', { text: fmtTime(k.last_used_at) }),
        el('td', { text: k.expires_at ? fmtTime(k.expires_at) : 'never' }),
        el('td', { class: 'nolabel' }, el('span', { class: `badge ${k.status}`, text: k.status })),
        el('td', { class: 'nolabel' }, revokeBtn)));
    }
    labelCells($('#keys-table'));
    show($('#keys-empty'), state.keys.length === 0);
  }

  $('#keys-filter-workspace').addEventListener('change', () => renderKeys());
  $('#key-workspace').addEventListener('change', () => show($('#key-new-workspace'), $('#key-workspace').value === '__new__'));

  $('#key-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    setError($('#key-form-error'), '');
    const scopes = [...document.querySelectorAll('#key-scopes input:checked')].map((i) => i.value);
    const body = {
      name: $('#key-name').value,
      scopes,
      allowed_ips: $('#key-ips').value,
      expires_at: $('#key-expiry').value || null,
    };
    if ($('#key-workspace').value === '__new__') {
      body.new_workspace = { name: $('#key-new-workspace-name').value, plan: $('#key-new-workspace-plan').value };
    } else {
      body.workspace_id = $('#key-workspace').value;
    }
    const submit = $('#key-create-submit');
    submit.disabled = true;
    try {
      const out = await api('POST', 'keys', body);
      $('#token-once-value').value = out.token;
      show($('#token-once-copied'), false);
      show($('#token-once'), true);
      $('#key-form').reset();
      state.wsId = out.key.workspace_id;
      $('#key-workspace').value = out.key.workspace_id;
      await loadKeysPage();
      $('#key-workspace').value = out.key.workspace_id;
      show($('#key-new-workspace'), false);
      $('#token-once').scrollIntoView({ block: 'nearest' });
    } catch (e) {
      setError($('#key-form-error'), e.message);
    } finally {
      submit.disabled = false;
    }
  });

  $('#token-once-copy').addEventListener('click', async () => {
    const input = $('#token-once-value');
    try {
      await navigator.clipboard.writeText(input.value);
    } catch {
      // Clipboard API needs a secure context; fall back to the selection.
      input.select();
      document.execCommand('copy');
    }
    show($('#token-once-copied'), true);
  });
  function clearTokenOnce() {
    $('#token-once-value').value = '';
    show($('#token-once'), false);
  }
  $('#token-once-close').addEventListener('click', clearTokenOnce);

  function confirmDialog(title, text, okLabel) {
    const dlg = $('#confirm-dialog');
    $('#confirm-title').textContent = title;
    $('#confirm-text').textContent = text;
    $('#confirm-ok').textContent = okLabel;
    return new Promise((resolve) => {
      dlg.addEventListener('close', () => resolve(dlg.returnValue === 'ok'), { once: true });
      dlg.returnValue = '';
      dlg.showModal();
    });
  }

  async function revokeKey(k) {
    const ok = await confirmDialog('Revoke this key?', `"${k.name}" (${k.prefix}…) stops working immediately. Calls with it get 401 key_revoked. This cannot be undone.`, 'Revoke');
    if (!ok) return;
    try {
      await api('POST', `keys/${encodeURIComponent(k.id)}/revoke`);
    } catch (e) {
      alert(e.message);
    }
    await renderKeys();
  }

  // ---------------------------------------------------------------- workspaces
  async function loadWorkspacesPage() {
    await refreshWorkspaces();
    fillWorkspaceSelect($('#ws-select'), { selected: state.wsId });
    show($('#ws-empty'), !state.workspaces.length);
    show($('#ws-details'), !!state.workspaces.length);
    if (!state.workspaces.length) return;
    state.logOffset = 0;
    await renderWorkspace();
  }

  async function renderWorkspace() {
    const id = $('#ws-select').value;
    state.wsId = id;
    const usage = await api('GET', `workspaces/${encodeURIComponent(id)}/usage?days=30`);
    const w = usage.workspace;
    $('#ws-plan').textContent = w.plan_label;
    $('#ws-plan-select').value = w.plan;
    $('#ws-plan-select').dataset.current = w.plan;
    showPlanHint($('#ws-plan-select'));
    $('#ws-rate').textContent = `${fmtNum(w.requests_per_minute)} requests/min per key`;
    $('#ws-credits-used').textContent = fmtNum(w.credits_used);
    $('#ws-credits-left').textContent = w.credits_left === null ? 'unlimited' : fmtNum(w.credits_left);
    $('#ws-credits-period').textContent = w.credits_per_month === null
      ? `period ${w.period} (UTC), custom limit`
      : `of ${fmtNum(w.credits_per_month)} in ${w.period} (UTC)`;
    const pct = w.credits_per_month ? Math.min(100, (100 * w.credits_used) / w.credits_per_month) : 0;
    $('#ws-credits-bar').style.width = `${pct}%`;
    $('#ws-credits-bar').classList.toggle('high', pct >= 90);
    $('#ws-keys-active').textContent = `${w.active_keys} active key${w.active_keys === 1 ? '' : 's'}`;
    drawChart($('#ws-chart'), usage.days, 30);

    const keys = (await api('GET', `keys?workspace=${encodeURIComponent(id)}`)).keys;
    const keySel = $('#log-key');
    const keepKey = keySel.value;
    keySel.textContent = '';
    keySel.append(el('option', { value: '', text: 'any' }));
    for (const k of keys) keySel.append(el('option', { value: k.id, text: `${k.name} (${k.prefix}…)` }));
    if ([...keySel.options].some((o) => o.value === keepKey)) keySel.value = keepKey;
    await renderLog();
  }

  const SVG = 'http://www.w3.org/2000/svg';
  function svg(tag, attrs, text) {
    const n = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, String(v));
    if (text !== undefined) n.textContent = text;
    return n;
  }

  /**
   * Bar chart of requests per day (errors stacked in red) for the last `days` days, in inline SVG drawn at the card's
   * own width in CSS pixels: the y-axis and its numbers stay in view and the text stays 10-11 px on a phone (a fixed
   * 900-unit drawing had to scroll there, hiding the axis). Drawn again when the card's width changes.
   */
  function drawChart(container, rows, days) {
    const byDay = new Map(rows.map((r) => [r.day, r]));
    const series = [];
    const today = new Date();
    for (let i = days - 1; i >= 0; i--) {
      const d = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate() - i));
      const key = d.toISOString().slice(0, 10);
      const r = byDay.get(key);
      series.push({ day: key, count: r ? r.count : 0, errors: r ? r.errors : 0 });
    }
    const W = Math.max(240, Math.floor(container.clientWidth || 900));
    const H = W < 600 ? 180 : 220, left = 34, right = 8, top = 10, bottom = 24;
    const max = Math.max(1, ...series.map((s) => s.count));
    const niceMax = (() => {
      const p = Math.pow(10, Math.floor(Math.log10(max)));
      const m = Math.ceil(max / p) * p;
      return m < 8 ? 4 * Math.ceil(m / 4) : m; // small counts: whole-number ticks
    })();
    const plotW = W - left - right, plotH = H - top - bottom;
    const bw = plotW / series.length;
    const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img', 'aria-label': 'Requests per day' });
    root.append(svg('line', { x1: left, x2: left, y1: top, y2: top + plotH, class: 'axis y-axis' }));
    for (let t = 0; t <= 4; t++) {
      const v = (niceMax * t) / 4;
      const y = top + plotH - (v / niceMax) * plotH;
      root.append(svg('line', { x1: left, x2: W - right, y1: y, y2: y, class: 'axis', 'stroke-dasharray': t ? '2,3' : '' }));
      const label = v >= 10000 ? `${+(v / 1000).toFixed(1)}k` : Number.isInteger(v) ? String(v) : v.toFixed(1);
      root.append(svg('text', { x: left - 5, y: y + 3, 'text-anchor': 'end', class: 'tick-y' }, label));
    }
    // A date label every 5th day (more apart where bars are under 10 px), always on the last day.
    const every = [1, 5, 10, 15].find((k) => k * bw >= 48) || 15;
    series.forEach((s, i) => {
      const x = left + i * bw + bw * 0.15, w = bw * 0.7;
      const hAll = (s.count / niceMax) * plotH, hErr = (s.errors / niceMax) * plotH;
      const g = svg('g', { 'data-day': s.day, 'data-count': s.count });
      g.append(svg('title', {}, `${s.day}: ${s.count} requests, ${s.errors} errors`));
      if (s.count > s.errors) g.append(svg('rect', { x, y: top + plotH - hAll, width: w, height: hAll - hErr, class: 'bar-ok' }));
      if (s.errors) g.append(svg('rect', { x, y: top + plotH - hErr, width: w, height: hErr, class: 'bar-err' }));
      root.append(g);
      if ((series.length - 1 - i) % every === 0) {
        const cx = Math.min(W - right - 14, Math.max(left + 14, x + w / 2));
        root.append(svg('text', { x: cx, y: H - 8, 'text-anchor': 'middle', class: 'tick-x' }, s.day.slice(5)));
      }
    });
    container.textContent = '';
    container.append(root);
    container.dataset.width = String(W);
    // Drawn again at a new width (a phone turned, a window resized).
    container.chartArgs = [rows, days];
    if (!container.chartObserver && window.ResizeObserver) {
      container.chartObserver = new ResizeObserver(() => {
        const width = Math.floor(container.clientWidth);
        if (width > 0 && String(Math.max(240, width)) !== container.dataset.width) drawChart(container, ...container.chartArgs);
      });
      container.chartObserver.observe(container);
    }
  }

  async function renderLog() {
    const params = new URLSearchParams({ workspace: state.wsId, limit: String(state.logLimit), offset: String(state.logOffset) });
    const add = (k, v) => { if (v) params.set(k, v); };
    add('status', $('#log-status').value);
    add('error_type', $('#log-error-type').value);
    add('endpoint', $('#log-endpoint').value);
    add('key', $('#log-key').value);
    const out = await api('GET', `requests?${params}`);
    const body = $('#log-table tbody');
    body.textContent = '';
    for (const r of out.requests) {
      const ok = r.status < 400;
      // On phones: time, call and status on one line, the id and the error on their own, the numbers labelled.
      body.append(el('tr', { dataset: { requestId: r.request_id } },
        el('td', { class: 'nolabel', text: fmtTime(r.time) }),
        el('td', { class: 'mono nolabel wide request-id', text: r.request_id }),
        el('td', { class: 'mono nolabel', text: `${r.method} ${r.endpoint || '—'}` }),
        // A key's refusals of one minute share a row: "429 ×120".
        el('td', { class: 'nolabel' }, el('span', { class: ok ? 'status-ok' : 'status-err', text: r.calls > 1 ? `${r.status} ×${r.calls}` : String(r.status), title: r.calls > 1 ? `${r.calls} calls in this minute, the first one's id` : undefined })),
        el('td', { class: 'error-cell nolabel wide' },
          r.error_type ? el('span', { class: 'mono', text: r.error_type }) : null,
          // The reason in words: the model service's detail for its 400/422, else the gateway's or the jobs API's message.
          r.status >= 400 && r.error_message ? el('div', { class: 'reason muted small', text: r.error_message }) : null),
        el('td', { class: 'mono', text: r.key_prefix ? `${r.key_prefix}…` : '—', title: r.key_name || '' }),
        el('td', { text: String(r.credits) }),
        el('td', { text: r.upstream_ms === null ? '—' : `${r.upstream_ms} ms` }),
        el('td', { text: `${r.total_ms} ms` })));
    }
    labelCells($('#log-table'));
    show($('#log-empty'), out.requests.length === 0);
    $('#log-prev').disabled = state.logOffset === 0;
    $('#log-next').disabled = !out.has_more;
    $('#log-page').textContent = out.requests.length ? `rows ${state.logOffset + 1}–${state.logOffset + out.requests.length}` : '';
  }

  $('#ws-select').addEventListener('change', () => { state.logOffset = 0; renderWorkspace(); });
  for (const id of ['#log-status', '#log-error-type', '#log-endpoint', '#log-key']) {
    $(id).addEventListener('change', () => { state.logOffset = 0; renderLog(); });
  }
  $('#log-refresh').addEventListener('click', () => renderWorkspace());
  $('#log-prev').addEventListener('click', () => { state.logOffset = Math.max(0, state.logOffset - state.logLimit); renderLog(); });
  $('#log-next').addEventListener('click', () => { state.logOffset += state.logLimit; renderLog(); });

  $('#ws-plan-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const plan = $('#ws-plan-select').value;
    const ok = await confirmDialog('Change plan?', `Switch this workspace to the ${plan} plan? Rate limits and monthly credits change immediately.`, 'Change plan');
    if (!ok) return;
    try { await api('POST', `workspaces/${encodeURIComponent(state.wsId)}/plan`, { plan }); } catch (e) { alert(e.message); }
    await loadWorkspacesPage();
  });

  $('#ws-create-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    setError($('#ws-create-error'), '');
    try {
      const out = await api('POST', 'workspaces', { name: $('#ws-create-name').value, plan: $('#ws-create-plan').value });
      $('#ws-create-form').reset();
      state.wsId = out.workspace.id;
      await loadWorkspacesPage();
    } catch (e) {
      setError($('#ws-create-error'), e.message);
    }
  });

  // ---------------------------------------------------------------- playground
  const pg = state.playground;

  function pgStatus(text, isError) {
    const s = $('#pg-status');
    s.textContent = text;
    s.className = isError ? 'error' : 'muted';
  }

  function updateRunButton() {
    $('#pg-run').disabled = !(pg.file && $('#pg-model').value && $('#pg-workspace').value);
    $('#pg-curl-copy').disabled = !(pg.file && $('#pg-model').value);
    if (!$('#pg-curl-box').hidden) $('#pg-curl').textContent = curlCommand();
  }

  /** Single-quoted for POSIX shells: 'it'\''s' */
  function shellQuote(s) { return `'${String(s).replace(/'/g, `'\\''`)}'`; }

  /** The playground's call as curl: same fields, the API key from $TOKEN (never the session's own key). */
  function curlCommand() {
    const name = pg.fileName || 'audio.wav';
    const format = $('#pg-format').value;
    const out = `${name.replace(/\.[^.]+$/, '')}_denoised.${format}`;
    const loudness = $('#pg-loudness').value;
    const url = `${location.origin}${BASE}/v1/noise-suppressor/denoise`;
    return [
      'curl -sS -D - -o ' + shellQuote(out),
      '  -H "X-API-Key: $TOKEN"',
      // curl reads ; and , after @file as options: quote such names for curl as well as for the shell.
      `  -F ${shellQuote(/[;,"\\]/.test(name) ? `file=@"${name.replace(/(["\\])/g, '\\$1')}"` : `file=@${name}`)}`,
      `  -F model=${shellQuote($('#pg-model').value)}`,
      `  -F attenuation_limit_db=${shellQuote($('#pg-atten').value)}`,
      `  -F output_format=${shellQuote(format)}`,
      // A preset (podcast, broadcast, keep) goes in `loudness`, a figure in `loudness_lufs`.
      ...(loudness ? [`  -F ${/^-?\d/.test(loudness) ? 'loudness_lufs' : 'loudness'}=${shellQuote(loudness)}`] : []),
      `  ${shellQuote(url)}`,
    ].join(' \\\n');
  }

  $('#pg-curl-copy').addEventListener('click', async () => {
    const text = curlCommand();
    $('#pg-curl').textContent = text;
    show($('#pg-curl-box'), true);
    try {
      await navigator.clipboard.writeText(text);
      show($('#pg-curl-copied'), true);
    } catch {
      // No clipboard (plain http on another host): select the text so Ctrl+C copies it.
      const range = document.createRange();
      range.selectNodeContents($('#pg-curl'));
      const sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      show($('#pg-curl-copied'), false);
    }
  });

  async function loadPlayground() {
    await refreshWorkspaces();
    const sel = $('#pg-workspace');
    fillWorkspaceSelect(sel, { selected: pg.workspaceId || state.wsId });
    if (!state.workspaces.length) {
      pgStatus('Create a workspace first (API keys or Workspaces page).', true);
      updateRunButton();
      return;
    }
    await selectPlaygroundWorkspace(sel.value);
  }

  async function selectPlaygroundWorkspace(id) {
    if (pg.workspaceId === id && pg.token && pg.models) { updateRunButton(); return; }
    pg.workspaceId = id;
    pg.token = null;
    updateRunButton();
    try {
      const key = await api('POST', 'playground/key', { workspace_id: id });
      pg.token = key.token;
      $('#pg-key-info').textContent = `Using key ${key.prefix}… ("console playground", expires ${fmtTime(key.expires_at)}).`;
      await loadModels();
    } catch (e) {
      pgStatus(`Could not prepare the playground: ${e.message}`, true);
    }
    updateRunButton();
  }

  /** GET /v1/noise-suppressor/models with a key: { models, default }. */
  async function fetchModels(token) {
    const res = await fetch(`${BASE}/v1/noise-suppressor/models`, { headers: { 'X-API-Key': token } });
    const data = await res.json().catch(() => null);
    if (!res.ok) {
      const err = (data && data.error) || {};
      throw new Error(`GET /models: ${res.status} ${err.type || ''} ${err.message || ''}`.trim());
    }
    return data;
  }

  /** The models as options (those not installed shown but disabled); keeps the choice when it is still there. */
  function fillModelSelect(sel, data) {
    const keep = sel.value;
    sel.textContent = '';
    for (const m of data.models) {
      sel.append(el('option', { value: m.id, disabled: !m.available, text: `${m.id} — ${m.label} (${m.sample_rate / 1000} kHz)${m.available ? '' : ' — not installed'}` }));
    }
    sel.value = keep && data.models.some((m) => m.id === keep && m.available) ? keep : data.default;
  }

  async function loadModels() {
    const data = await fetchModels(pg.token);
    pg.models = data.models;
    fillModelSelect($('#pg-model'), data);
  }

  $('#pg-workspace').addEventListener('change', () => selectPlaygroundWorkspace($('#pg-workspace').value));
  $('#pg-model').addEventListener('change', updateRunButton);
  $('#pg-format').addEventListener('change', updateRunButton);
  $('#pg-loudness').addEventListener('change', updateRunButton);
  $('#pg-atten').addEventListener('input', () => { $('#pg-atten-value').textContent = $('#pg-atten').value; updateRunButton(); });

  async function setInputAudio(blob, name) {
    pg.file = blob;
    pg.fileName = name;
    pg.beforeDecoded = null;
    if (pg.beforeUrl) URL.revokeObjectURL(pg.beforeUrl);
    pg.beforeUrl = URL.createObjectURL(blob);
    $('#pg-before-audio').src = pg.beforeUrl;
    const canvas = $('#pg-before-spec');
    delete canvas.dataset.ready;
    $('#pg-before-info').textContent = `${name} · ${(blob.size / 1024).toFixed(0)} KiB`;
    updateRunButton();
    try {
      const bytes = await blob.arrayBuffer();
      pg.beforeBytes = bytes;
      // At the file's own rate (its header), so a 16 kHz file is drawn from 0 to 8 kHz, not to 24 kHz.
      const decoded = await Spectrogram.decodeMono(bytes, Spectrogram.sourceSampleRate(bytes) || 48000);
      pg.beforeDecoded = decoded;
      pg.beforePeakDb = Spectrogram.draw(canvas, decoded);
      $('#pg-before-info').textContent = `${name} · ${(blob.size / 1024).toFixed(0)} KiB · ${decoded.duration.toFixed(2)} s`;
    } catch (e) {
      $('#pg-before-info').textContent = `${name}: the browser cannot decode this format for a spectrogram (the API may still accept it).`;
    }
  }

  $('#pg-file').addEventListener('change', () => {
    const f = $('#pg-file').files[0];
    if (f) {
      $('#pg-record-state').textContent = '';
      setInputAudio(f, f.name);
    }
  });

  $('#pg-record').addEventListener('click', async () => {
    const btn = $('#pg-record');
    if (pg.recorder) { pg.recorder.stop(); return; }
    if (!navigator.mediaDevices || !window.MediaRecorder) {
      $('#pg-record-state').textContent = 'Recording needs a browser with MediaRecorder on https or localhost.';
      return;
    }
    let stream;
    try {
      stream = await navigator.mediaDevices.getUserMedia({ audio: { noiseSuppression: false, echoCancellation: false, autoGainControl: false } });
    } catch (e) {
      $('#pg-record-state').textContent = `Microphone unavailable: ${e.message}`;
      return;
    }
    const chunks = [];
    const rec = new MediaRecorder(stream);
    pg.recorder = rec;
    rec.addEventListener('dataavailable', (ev) => { if (ev.data.size) chunks.push(ev.data); });
    rec.addEventListener('stop', () => {
      stream.getTracks().forEach((t) => t.stop());
      pg.recorder = null;
      btn.textContent = '● Record';
      btn.classList.remove('recording');
      const type = rec.mimeType || 'audio/webm';
      const ext = type.includes('ogg') ? 'ogg' : type.includes('mp4') ? 'm4a' : 'webm';
      $('#pg-record-state').textContent = 'Recorded.';
      $('#pg-file').value = '';
      setInputAudio(new Blob(chunks, { type }), `recording.${ext}`);
    });
    rec.start();
    btn.textContent = '■ Stop';
    btn.classList.add('recording');
    $('#pg-record-state').textContent = 'Recording… (no browser noise suppression)';
  });

  $('#pg-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    if (!pg.file) return;
    // The session key is gone (revoked on the keys page, or the session was renewed): get a fresh one.
    if (!pg.token) await selectPlaygroundWorkspace($('#pg-workspace').value);
    if (!pg.token) return;
    const form = new FormData();
    form.append('file', pg.file, pg.fileName);
    form.append('model', $('#pg-model').value);
    form.append('attenuation_limit_db', $('#pg-atten').value);
    const format = $('#pg-format').value;
    form.append('output_format', format);
    const loudness = $('#pg-loudness').value;
    if (loudness) form.append(/^-?\d/.test(loudness) ? 'loudness_lufs' : 'loudness', loudness);
    const run = $('#pg-run');
    run.disabled = true;
    pgStatus('Uploading and cleaning…');
    const afterCanvas = $('#pg-after-spec');
    delete afterCanvas.dataset.ready;
    const started = performance.now();
    try {
      const send = () => fetch(`${BASE}/v1/noise-suppressor/denoise`, { method: 'POST', headers: { 'X-API-Key': pg.token }, body: form });
      let res = await send();
      if (res.status === 401) {
        // The session's key was revoked (e.g. on the keys page) or expired: take a fresh one, once.
        pg.token = null;
        pg.models = null;
        await selectPlaygroundWorkspace($('#pg-workspace').value);
        if (pg.token) res = await send();
      }
      const requestId = res.headers.get('X-Request-Id') || '';
      if (!res.ok) {
        const data = await res.json().catch(() => null);
        const msg = data && data.error ? `${data.error.type}: ${data.error.message}` : data && data.detail ? String(data.detail) : `HTTP ${res.status}`;
        pgStatus(`Failed (${res.status}) ${msg} · request ${requestId}`, true);
        return;
      }
      const blob = await res.blob();
      let stats = {};
      try { stats = JSON.parse(res.headers.get('X-NS-Stats') || '{}'); } catch { /* no stats */ }
      if (pg.afterUrl) URL.revokeObjectURL(pg.afterUrl);
      pg.afterUrl = URL.createObjectURL(blob);
      $('#pg-after-audio').src = pg.afterUrl;
      const dl = $('#pg-download');
      dl.href = pg.afterUrl;
      dl.download = `${(pg.fileName || 'audio').replace(/\.[^.]+$/, '')}_denoised.${format}`;
      show(dl, true);
      const parts = [`request ${requestId}`];
      if (typeof stats.duration_s === 'number') parts.push(`${stats.duration_s.toFixed(2)} s audio`);
      if (typeof stats.processing_s === 'number') parts.push(`processed in ${stats.processing_s.toFixed(2)} s`);
      if (typeof stats.rtf === 'number') parts.push(`RTF ${stats.rtf.toFixed(3)}`);
      const lufs = (v) => (typeof v === 'number' ? `${v.toFixed(1)} LUFS` : 'silent');
      if ('input_loudness_lufs' in stats) parts.push(`loudness ${lufs(stats.input_loudness_lufs)} → ${lufs(stats.output_loudness_lufs)}`);
      if (typeof stats.output_true_peak_dbtp === 'number') parts.push(`peak ${stats.output_true_peak_dbtp.toFixed(1)} dBTP`);
      if (typeof stats.noise_removed_db === 'number') parts.push(`noise −${stats.noise_removed_db.toFixed(1)} dB`);
      $('#pg-after-info').textContent = parts.join(' · ');
      pgStatus(`Done in ${((performance.now() - started) / 1000).toFixed(1)} s.`);
      const bytes = await blob.arrayBuffer();
      const decoded = await Spectrogram.decodeMono(bytes, stats.output_sample_rate || Spectrogram.sourceSampleRate(bytes) || 48000);
      // The server measured the input's rate: where the header did not tell it, "before" is decoded again at that rate.
      if (pg.beforeDecoded && pg.beforeBytes && stats.input_sample_rate && Math.min(96000, Math.max(8000, stats.input_sample_rate)) !== pg.beforeDecoded.sampleRate) {
        pg.beforeDecoded = await Spectrogram.decodeMono(pg.beforeBytes, stats.input_sample_rate);
        pg.beforePeakDb = Spectrogram.draw($('#pg-before-spec'), pg.beforeDecoded);
      }
      // One frequency axis for both, from 0 to the higher of the two Nyquist frequencies, and the colour scale of
      // "before", so the removed noise shows as darker areas at the same height.
      const axisHz = Math.max(decoded.sampleRate, pg.beforeDecoded ? pg.beforeDecoded.sampleRate : 0) / 2;
      if (pg.beforeDecoded) Spectrogram.draw($('#pg-before-spec'), pg.beforeDecoded, pg.beforePeakDb, axisHz);
      Spectrogram.draw(afterCanvas, decoded, pg.beforePeakDb, axisHz);
    } catch (e) {
      pgStatus(`Failed: ${e.message}`, true);
    } finally {
      updateRunButton();
    }
  });

  // ---------------------------------------------------------------- start
  (async () => {
    try {
      const s = await api('GET', 'session');
      if (s.signed_in) await signedIn(s.csrf_token);
      else signedOut();
    } catch {
      signedOut();
    }
  })();
})();
