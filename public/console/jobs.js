// The console's Jobs page: every workspace's asynchronous jobs with live progress, their results, cancel, and the
// webhooks (signing secret, delivery log). Talks to /console/api/jobs* and /console/api/webhooks/* with the session
// cookie; console.js calls NSJobsPage.load(helpers) when the page is shown. Data goes in through textContent only.
'use strict';
(function () {
  let h = null; // helpers from console.js: { api, el, show, fmtTime, confirmDialog, refreshWorkspaces, labelCells, workspaces }
  let timer = null;
  const cursors = [null]; // cursor of each page shown so far; the last is the current page's
  let nextCursor = null;
  const $ = (sel) => document.querySelector(sel);

  function fmtBytes(n) {
    if (n === null || n === undefined) return '—';
    if (n < 1024) return `${n} B`;
    if (n < 1048576) return `${(n / 1024).toFixed(0)} KiB`;
    if (n < 1073741824) return `${(n / 1048576).toFixed(1)} MiB`;
    return `${(n / 1073741824).toFixed(2)} GiB`;
  }

  function fmtDuration(s) {
    if (s === null || s === undefined) return '';
    if (s < 60) return `${s.toFixed(1)} s`;
    const m = Math.floor(s / 60);
    return m < 60 ? `${m} min ${Math.round(s % 60)} s` : `${Math.floor(m / 60)} h ${m % 60} min`;
  }

  function build() {
    const page = $('#page-jobs');
    if (page.childElementCount) return;
    const { el } = h;
    page.append(
      el('div', { class: 'page-head' },
        el('h1', { text: 'Jobs' }),
        el('div', { class: 'filters' },
          el('label', { class: 'inline' }, 'Workspace', el('select', { id: 'jobs-workspace' })),
          el('label', { class: 'inline' }, 'Status', el('select', { id: 'jobs-status' },
            ...['', 'queued', 'running', 'succeeded', 'failed', 'canceled'].map((s) => el('option', { value: s, text: s || 'any' })))),
          el('button', { type: 'button', id: 'jobs-refresh', class: 'ghost small', text: 'Refresh' }))),
      el('p', { class: 'muted small', text: 'Long recordings submitted with POST /v1/noise-suppressor/jobs (or `nsm jobs submit`). ' +
        'Results are kept for the retention period, then deleted with the job. This list refreshes itself while jobs are queued or running.' }),
      // Tables scroll inside their card where the screen is narrow; on phones they become cards (console.css).
      el('div', { class: 'card' },
        el('div', { class: 'table-wrap' }, el('table', { id: 'jobs-table', class: 'data stack' },
          el('thead', {}, el('tr', {}, ...['Created', 'Job', 'Workspace', 'Input', 'Model', 'Status', 'Progress', 'Result', ''].map((t) => el('th', { text: t })))),
          el('tbody'))),
        el('p', { id: 'jobs-empty', class: 'muted', text: 'No jobs match.', hidden: true }),
        el('div', { class: 'pager' },
          el('button', { type: 'button', id: 'jobs-first', class: 'ghost small', text: '← Newest' }),
          el('span', { id: 'jobs-page', class: 'muted' }),
          el('button', { type: 'button', id: 'jobs-older', class: 'ghost small', text: 'Older →' }))),
      el('div', { class: 'card', id: 'webhooks-card' },
        el('h2', { text: 'Webhooks' }),
        el('p', { class: 'muted small', text: 'Each finished job with a webhook_url gets a POST {id, type, created_at, data: job} signed with the ' +
          'workspace secret: X-NS-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "t.body">. Failed deliveries are retried with backoff for 24 h.' }),
        el('div', { class: 'filters' },
          el('label', { class: 'inline' }, 'Workspace', el('select', { id: 'hooks-workspace' })),
          el('button', { type: 'button', id: 'hooks-reveal', class: 'ghost small', text: 'Show signing secret' }),
          el('button', { type: 'button', id: 'hooks-rotate', class: 'ghost small', text: 'Rotate secret' })),
        el('div', { class: 'copy-row', id: 'hooks-secret-row', hidden: true },
          el('input', { id: 'hooks-secret', type: 'text', readonly: true, spellcheck: 'false' })),
        el('div', { class: 'table-wrap' }, el('table', { id: 'hooks-table', class: 'data stack' },
          el('thead', {}, el('tr', {}, ...['Created', 'Job', 'Event', 'URL', 'Status', 'Attempts', 'Last answer', 'Next attempt'].map((t) => el('th', { text: t })))),
          el('tbody'))),
        el('p', { id: 'hooks-empty', class: 'muted', text: 'No deliveries yet.', hidden: true })));

    $('#jobs-workspace').addEventListener('change', () => { resetPages(); renderJobs(); });
    $('#jobs-status').addEventListener('change', () => { resetPages(); renderJobs(); });
    $('#jobs-refresh').addEventListener('click', () => { renderJobs(); renderDeliveries(); });
    $('#jobs-first').addEventListener('click', () => { resetPages(); renderJobs(); });
    $('#jobs-older').addEventListener('click', () => { if (nextCursor) { cursors.push(nextCursor); renderJobs(); } });
    $('#hooks-workspace').addEventListener('change', () => { hideSecret(); renderDeliveries(); });
    $('#hooks-reveal').addEventListener('click', revealSecret);
    $('#hooks-rotate').addEventListener('click', rotateSecret);
  }

  function resetPages() {
    cursors.length = 1;
    nextCursor = null;
  }

  function fillWorkspaces(sel, withAll) {
    const keep = sel.value;
    sel.textContent = '';
    if (withAll) sel.append(h.el('option', { value: '', text: 'All workspaces' }));
    for (const w of h.workspaces()) sel.append(h.el('option', { value: w.id, text: w.name }));
    if ([...sel.options].some((o) => o.value === keep)) sel.value = keep;
  }

  function statusBadge(job) {
    return h.el('span', { class: `badge job-${job.status}`, text: job.status, title: job.error ? `${job.error.type}: ${job.error.message}` : '' });
  }

  function progressCell(job) {
    const { el } = h;
    if (job.status === 'running' || job.status === 'queued') {
      const pct = Math.round(job.progress * 100);
      const fill = el('div', { class: 'bar-fill' });
      fill.style.width = `${pct}%`; // CSSOM, allowed by the console's CSP (no inline style attributes)
      return el('td', { class: 'job-progress nolabel wide' },
        el('div', { class: 'bar', role: 'progressbar', 'aria-valuenow': String(pct), 'aria-valuemin': '0', 'aria-valuemax': '100' }, fill),
        el('span', { class: 'muted small', text: job.status === 'queued' ? 'waiting' : `${pct} %${job.attempts > 1 ? ` · attempt ${job.attempts}` : ''}` }));
    }
    if (job.status === 'succeeded' && job.stats) {
      return el('td', { class: 'small', text: `${fmtDuration(job.stats.duration_s)} in ${fmtDuration(job.stats.processing_s)}` });
    }
    if (job.error) return el('td', { class: 'small error nolabel wide', text: `${job.error.type}: ${job.error.message}` });
    return el('td', {});
  }

  function resultCell(job) {
    const { el } = h;
    if (job.result) {
      return el('td', { class: 'nolabel' },
        el('a', { href: `api/jobs/${encodeURIComponent(job.id)}/result`, class: 'job-download', download: '', text: `Download (${fmtBytes(job.result.bytes)})` }),
        el('div', { class: 'muted small', text: `until ${h.fmtTime(job.result.expires_at)}` }));
    }
    if (job.result_deleted_at) return el('td', { class: 'muted small', text: 'result deleted' });
    return el('td', { class: 'muted no-result', text: '—' });
  }

  async function renderJobs() {
    const params = new URLSearchParams({ limit: '25' });
    const ws = $('#jobs-workspace').value;
    const status = $('#jobs-status').value;
    if (ws) params.set('workspace', ws);
    if (status) params.set('status', status);
    const cursor = cursors[cursors.length - 1];
    if (cursor) params.set('cursor', cursor);
    const out = await h.api('GET', `jobs?${params}`);
    nextCursor = out.next_cursor;
    const { el } = h;
    const body = $('#jobs-table tbody');
    body.textContent = '';
    for (const job of out.jobs) {
      const cancel = job.status === 'queued' || job.status === 'running'
        ? el('button', { type: 'button', class: 'link-danger job-cancel', text: 'Cancel', onclick: () => cancelJob(job) })
        : null;
      // On phones: status and time first, then the input, the id, the workspace and model, progress, result.
      body.append(el('tr', { dataset: { jobId: job.id, status: job.status } },
        el('td', { class: 'nolabel', text: h.fmtTime(job.created_at) }),
        el('td', { class: 'mono nolabel wide job-id', text: job.id }),
        el('td', { text: job.workspace_name }),
        el('td', { class: 'nolabel wide job-input' }, el('div', { class: 'filename', text: job.input.filename }),
          el('div', { class: 'muted small', text: `${job.input.source === 'url' ? 'URL' : 'upload'} · ${fmtBytes(job.input.bytes)}` })),
        el('td', { class: 'mono', text: `${job.params.model} → ${job.params.output_format}` }),
        el('td', { class: 'nolabel job-status' }, statusBadge(job)),
        progressCell(job),
        resultCell(job),
        el('td', { class: 'nolabel' }, cancel)));
    }
    h.labelCells($('#jobs-table'));
    h.show($('#jobs-empty'), out.jobs.length === 0);
    $('#jobs-first').disabled = cursors.length === 1;
    $('#jobs-older').disabled = !nextCursor;
    $('#jobs-page').textContent = `page ${cursors.length}`;
    // Live progress: poll while anything on this page is still moving.
    clearTimeout(timer);
    if (out.jobs.some((j) => j.status === 'queued' || j.status === 'running')) {
      timer = setTimeout(() => {
        if (!$('#page-jobs').hidden) renderJobs().catch((e) => console.error(e));
      }, 1500);
    }
  }

  async function cancelJob(job) {
    const ok = await h.confirmDialog('Cancel this job?', `${job.id} (${job.input.filename}) stops now; its credit is refunded.`, 'Cancel job');
    if (!ok) return;
    try {
      await h.api('POST', `jobs/${encodeURIComponent(job.id)}/cancel`);
    } catch (e) {
      alert(e.message);
    }
    await renderJobs();
  }

  function hideSecret() {
    $('#hooks-secret').value = '';
    h.show($('#hooks-secret-row'), false);
  }

  async function revealSecret() {
    const ws = $('#hooks-workspace').value;
    if (!ws) return;
    const out = await h.api('GET', `webhooks/secret?workspace=${encodeURIComponent(ws)}`);
    $('#hooks-secret').value = out.secret;
    h.show($('#hooks-secret-row'), true);
  }

  async function rotateSecret() {
    const ws = $('#hooks-workspace').value;
    if (!ws) return;
    const ok = await h.confirmDialog('Rotate the signing secret?', 'Deliveries from now on are signed with a new secret; receivers must be updated.', 'Rotate');
    if (!ok) return;
    const out = await h.api('POST', 'webhooks/secret/rotate', { workspace_id: ws });
    $('#hooks-secret').value = out.secret;
    h.show($('#hooks-secret-row'), true);
    await renderDeliveries();
  }

  async function renderDeliveries() {
    const ws = $('#hooks-workspace').value;
    const out = await h.api('GET', `webhooks/deliveries?limit=50${ws ? `&workspace=${encodeURIComponent(ws)}` : ''}`);
    const { el } = h;
    const body = $('#hooks-table tbody');
    body.textContent = '';
    for (const d of out.deliveries) {
      body.append(el('tr', { dataset: { deliveryId: d.id, status: d.status } },
        el('td', { class: 'nolabel', text: h.fmtTime(d.created_at) }),
        el('td', { class: 'mono nolabel', text: d.job_id }),
        el('td', { class: 'mono nolabel', text: d.event }),
        el('td', { class: 'mono small wide hook-url', text: d.url }),
        el('td', { class: 'nolabel' }, el('span', { class: `badge delivery-${d.status}`, text: d.status })),
        el('td', { text: String(d.attempts) }),
        el('td', { class: 'small', text: d.last_status ? `HTTP ${d.last_status}` : (d.last_error || '—'), title: d.last_error || '' }),
        el('td', { text: d.next_attempt_at ? h.fmtTime(d.next_attempt_at) : '—' })));
    }
    h.labelCells($('#hooks-table'));
    h.show($('#hooks-empty'), out.deliveries.length === 0);
  }

  window.NSJobsPage = {
    async load(helpers) {
      h = helpers;
      build();
      await h.refreshWorkspaces();
      fillWorkspaces($('#jobs-workspace'), true);
      fillWorkspaces($('#hooks-workspace'), false);
      resetPages();
      await Promise.all([renderJobs(), renderDeliveries()]);
    },
  };
})();
