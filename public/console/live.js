// The console's Live page: the microphone through the real streaming API (GET /v1/noise-suppressor/stream, a
// WebSocket opened with a single-use ticket that the session's playground key asks for) and back to the speakers,
// with level meters, the latency, a before/after switch and the model. With "cancel echo" the page plays the sample
// through the speakers and sends everything it plays as the stream's echo reference (channels=2&echo_reference=last),
// so the sample's echo (and the playback's) is removed from what comes back. console.js calls NSLivePage.load(helpers)
// when the page is shown and NSLivePage.leave() when another page is (or the session ends). Data goes in as text only.
'use strict';
(function () {
  const FRAME_MS = 20; // what the capture worklet sends per message
  const PREBUFFER_MS = 40; // the playback jitter buffer: played once this much is queued
  const MAX_BUFFER_MS = 300; // ...and never more than this behind
  const KEEP_S = 60; // audio kept in window.__live (for the browser test and for debugging)
  const METER_FLOOR_DB = -60;
  const $ = (sel) => document.querySelector(sel);
  const BASE = location.pathname.replace(/\/console(\/.*)?$/, '');
  const API = `${BASE}/v1/noise-suppressor`;

  let h = null; // helpers from console.js: { api, el, show, fmtTime, refreshWorkspaces, fillWorkspaceSelect, fetchModels, fillModelSelect }
  const keys = new Map(); // workspace id → its playground key { token, key_id, prefix, expires_at }
  let models = [];
  let run = null; // the stream now running (start() .. teardown())
  let hear = 'after';

  function build() {
    const page = $('#page-live');
    if (page.childElementCount) return;
    const { el } = h;
    const meter = (id, label) => el('div', { class: 'meter-row' },
      el('span', { class: 'meter-label', text: label }),
      el('div', { class: 'meter', role: 'meter', 'aria-label': `${label} level`, 'aria-valuemin': METER_FLOOR_DB, 'aria-valuemax': 0, id: `${id}-meter` },
        el('div', { class: 'meter-fill', id: `${id}-fill` })),
      el('output', { id: `${id}-db`, class: 'meter-db', text: 'silent' }));
    const stat = (id, label, title) => el('div', { class: 'live-stat', title },
      el('div', { class: 'stat-label', text: label }), el('div', { class: 'live-stat-value', id, text: '—' }));
    page.append(
      el('div', { class: 'page-head' }, el('h1', { text: 'Live' })),
      el('div', { class: 'card' },
        el('p', { class: 'muted', text: 'Your microphone through the streaming API (GET /v1/noise-suppressor/stream, a WebSocket) and back ' +
          'to your speakers, with the workspace\'s console playground key. Use headphones: speakers would feed back into the ' +
          'microphone. Each started minute costs the workspace 1 credit and the stream appears in its request log.' }),
        el('form', { id: 'live-form', autocomplete: 'off' },
          el('div', { class: 'grid3' },
            el('label', {}, 'Workspace', el('select', { id: 'live-workspace' })),
            el('label', {}, 'Model', el('select', { id: 'live-model' })),
            el('label', {}, 'Attenuation limit ', el('span', { class: 'muted', text: '(dB; 0 = remove as much as possible)' }),
              el('span', { class: 'range-row' },
                el('input', { id: 'live-atten', type: 'range', min: 0, max: 100, step: 1, value: 0 }),
                el('output', { id: 'live-atten-value', text: '0' })))),
          el('label', { class: 'live-echo' }, el('input', { id: 'live-echo', type: 'checkbox' }),
            ' Play a sample through the speakers and cancel its echo ',
            el('span', { class: 'muted', text: '(speakers, not headphones: what the page plays goes with the stream as its echo reference)' })),
          el('div', { class: 'actions' },
            el('button', { type: 'submit', id: 'live-start', class: 'primary', text: '● Start' }),
            el('button', { type: 'button', id: 'live-stop', class: 'ghost', text: '■ Stop', disabled: true }),
            el('span', { id: 'live-status', class: 'muted', role: 'status', dataset: { state: 'idle' } }))),
        el('p', { id: 'live-key-info', class: 'muted small' })),
      el('div', { class: 'card live-monitor' },
        el('div', { class: 'live-head' },
          el('h2', { text: 'Listen to' }),
          el('div', { class: 'segmented', role: 'group', 'aria-label': 'What the speakers play' },
            el('button', { type: 'button', id: 'live-hear-before', 'aria-pressed': 'false', text: 'Before (microphone)' }),
            el('button', { type: 'button', id: 'live-hear-after', 'aria-pressed': 'true', text: 'After (denoised)' }))),
        el('div', { class: 'meters' }, meter('live-in', 'Microphone'), meter('live-out', 'Denoised')),
        el('div', { class: 'live-stats' },
          stat('live-model-delay', 'Model delay', 'The model\'s algorithmic delay, as the server declares it (latency_ms of "ready")'),
          stat('live-rtt', 'Round trip', 'Measured: what network and server add on top of the model delay (from sending the frame a sample needs to receiving that sample), median of the last 2 s'),
          stat('live-buffer', 'Playback buffer', 'Denoised audio queued for the speakers (jitter buffer)'),
          stat('live-total', 'Mic to ear ≈', 'Frame + model delay + round trip + playback buffer + the audio device\'s own latency')),
        el('p', { id: 'live-info', class: 'muted small' })));

    $('#live-form').addEventListener('submit', (ev) => { ev.preventDefault(); start(); });
    $('#live-stop').addEventListener('click', () => stop());
    $('#live-workspace').addEventListener('change', () => selectWorkspace($('#live-workspace').value));
    $('#live-atten').addEventListener('input', () => { $('#live-atten-value').textContent = $('#live-atten').value; });
    $('#live-hear-before').addEventListener('click', () => setHear('before'));
    $('#live-hear-after').addEventListener('click', () => setHear('after'));
  }

  function setStatus(state, text, isError) {
    const s = $('#live-status');
    s.dataset.state = state;
    s.textContent = text;
    s.className = isError ? 'error' : 'muted';
  }

  function setRunning(on) {
    $('#live-start').disabled = on || !$('#live-model').value;
    $('#live-stop').disabled = !on;
    for (const id of ['#live-workspace', '#live-model', '#live-atten']) $(id).disabled = on;
  }

  async function load(helpers) {
    h = helpers;
    build();
    await h.refreshWorkspaces();
    const sel = $('#live-workspace');
    h.fillWorkspaceSelect(sel, { selected: sel.value || undefined });
    if (!h.workspaces().length) {
      setStatus('idle', 'Create a workspace first (API keys or Workspaces page).', true);
      setRunning(false);
      return;
    }
    if (!run) await selectWorkspace(sel.value);
  }

  /** The session's playground key for a workspace (created on first use; `fresh` after the old one was refused). */
  async function keyFor(workspaceId, fresh) {
    if (fresh) keys.delete(workspaceId);
    if (!keys.has(workspaceId)) keys.set(workspaceId, await h.api('POST', 'playground/key', { workspace_id: workspaceId }));
    return keys.get(workspaceId);
  }

  async function selectWorkspace(id) {
    setRunning(true);
    $('#live-stop').disabled = true;
    try {
      const key = await keyFor(id);
      $('#live-key-info').textContent = `Using key ${key.prefix}… ("console playground", expires ${h.fmtTime(key.expires_at)}).`;
      const data = await h.fetchModels(key.token);
      models = data.models;
      h.fillModelSelect($('#live-model'), data);
      if (!run) setStatus('idle', '');
    } catch (e) {
      setStatus('error', `Could not prepare the stream: ${e.message}`, true);
    }
    setRunning(false);
  }

  function setHear(which) {
    hear = which;
    $('#live-hear-before').setAttribute('aria-pressed', String(which === 'before'));
    $('#live-hear-after').setAttribute('aria-pressed', String(which === 'after'));
    if (run) applyHear(run);
  }

  function applyHear(r) {
    // A short ramp, so switching does not click.
    const t = r.ctx.currentTime;
    r.rawGain.gain.setTargetAtTime(hear === 'before' ? 1 : 0, t, 0.015);
    r.outGain.gain.setTargetAtTime(hear === 'after' ? 1 : 0, t, 0.015);
  }

  /** A single-use ticket for the WebSocket (browsers cannot set its headers); a refused key is replaced once. */
  async function ticket(workspaceId) {
    for (const fresh of [false, true]) {
      const key = await keyFor(workspaceId, fresh);
      const res = await fetch(`${API}/stream/tickets`, { method: 'POST', headers: { 'X-API-Key': key.token } });
      const data = await res.json().catch(() => null);
      if (res.ok) return { ticket: data.ticket, key };
      if (res.status === 401 && !fresh) continue;
      const err = (data && data.error) || {};
      throw new Error(`POST /stream/tickets: ${res.status} ${err.type || ''} ${err.message || ''}`.trim());
    }
    throw new Error('no ticket');
  }

  /** An AudioContext at the model's own rate (no resampling on the server); the device's rate where that fails. */
  function audioContextFor(rate) {
    try {
      return new AudioContext({ sampleRate: rate, latencyHint: 'interactive' });
    } catch {
      return new AudioContext({ latencyHint: 'interactive' });
    }
  }

  async function start() {
    if (run) return;
    const workspaceId = $('#live-workspace').value;
    const model = models.find((m) => m.id === $('#live-model').value);
    if (!workspaceId || !model) return;
    setRunning(true);
    setStatus('connecting', 'Starting…');
    const r = { stopping: false, ended: false, ready: null, requestId: '', error: null, t0: Date.now(), echo: $('#live-echo').checked };
    run = r;
    try {
      r.mic = await navigator.mediaDevices.getUserMedia({
        // The raw microphone: the browser's own noise suppression would hide what the model does.
        audio: { channelCount: 1, echoCancellation: false, noiseSuppression: false, autoGainControl: false },
      });
      r.ctx = audioContextFor(model.sample_rate);
      await r.ctx.audioWorklet.addModule('live-worklet.js');
      const rate = r.ctx.sampleRate;
      r.frameSamples = Math.round((rate * FRAME_MS) / 1000);
      const source = r.ctx.createMediaStreamSource(r.mic);
      r.capture = new AudioWorkletNode(r.ctx, 'live-capture', {
        numberOfInputs: r.echo ? 2 : 1, numberOfOutputs: 1, outputChannelCount: [1], channelCount: 1, channelCountMode: 'explicit',
        processorOptions: { frameSamples: r.frameSamples, reference: r.echo },
      });
      r.playback = new AudioWorkletNode(r.ctx, 'live-playback', {
        numberOfInputs: 0, numberOfOutputs: 1, outputChannelCount: [1],
        processorOptions: { prebufferSamples: Math.round((rate * PREBUFFER_MS) / 1000), maxBufferSamples: Math.round((rate * MAX_BUFFER_MS) / 1000) },
      });
      r.rawGain = new GainNode(r.ctx, { gain: 0 });
      r.outGain = new GainNode(r.ctx, { gain: 0 });
      source.connect(r.capture);
      r.capture.connect(r.ctx.destination); // silent; keeps the capture pulled by the graph
      source.connect(r.rawGain).connect(r.ctx.destination);
      r.playback.connect(r.outGain).connect(r.ctx.destination);
      if (r.echo) {
        // The reference is all the page plays (the sample, added below, and what "Listen to" plays), as it plays it.
        r.rawGain.connect(r.capture, 0, 1);
        r.outGain.connect(r.capture, 0, 1);
      }
      applyHear(r);
      await r.ctx.resume();
      resetStats(r, rate);
      r.capture.port.onmessage = (e) => onFrame(r, e.data);
      r.playback.port.onmessage = (e) => { r.player = e.data; };
      const { ticket: t, key } = await ticket(workspaceId);
      r.keyId = key.key_id;
      if (r.echo) await playSample(r, key);
      if (r.stopping) return;
      const q = new URLSearchParams({
        ticket: t, model: model.id, sample_rate: String(rate), encoding: 'pcm_f32le', channels: r.echo ? '2' : '1',
        attenuation_limit_db: $('#live-atten').value,
      });
      if (r.echo) q.set('echo_reference', 'last');
      const ws = new WebSocket(`${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}${API}/stream?${q}`);
      ws.binaryType = 'arraybuffer';
      r.ws = ws;
      ws.onmessage = (e) => (typeof e.data === 'string' ? onText(r, e.data) : onAudio(r, e.data));
      ws.onclose = (e) => onClose(r, e);
      setStatus('connecting', 'Connecting…');
      requestAnimationFrame(() => paint(r));
    } catch (e) {
      const stopped = r.stopping;
      teardown(r);
      if (stopped) setStatus('stopped', 'Stopped.');
      else setStatus('error', `Could not start: ${e.message || e}`, true);
    }
  }

  /** The sample (GET /sample), in a loop, to the speakers and to the capture's reference input. */
  async function playSample(r, key) {
    const res = await fetch(`${API}/sample`, { headers: { 'X-API-Key': key.token } });
    if (!res.ok) throw new Error(`GET /sample: ${res.status}`);
    const buffer = await r.ctx.decodeAudioData(await res.arrayBuffer());
    r.sample = new AudioBufferSourceNode(r.ctx, { buffer, loop: true });
    r.sample.connect(r.ctx.destination);
    r.sample.connect(r.capture, 0, 1);
    r.sample.start();
  }

  function resetStats(r, rate) {
    r.rate = rate;
    r.sentSamples = 0;
    r.receivedSamples = 0;
    r.sendTimes = new Float64Array(1024); // when each frame was sent (a ring, by frame index)
    r.rtts = []; // [time, ms] of the last measurements
    r.inDb = METER_FLOOR_DB;
    r.outDb = METER_FLOOR_DB;
    r.player = { bufferedSamples: 0, underruns: 0, droppedSamples: 0 };
    window.__live = { sampleRate: rate, sent: [], received: [], kept: { sent: 0, received: 0 } };
  }

  function levelDb(samples) {
    let sum = 0;
    for (let i = 0; i < samples.length; i++) sum += samples[i] * samples[i];
    return Math.max(METER_FLOOR_DB, 10 * Math.log10(sum / Math.max(1, samples.length) + 1e-12));
  }

  /** The first KEEP_S seconds of what was sent or received ('sent' | 'received'), copied (frames are transferred on). */
  function keep(kind, samples) {
    const live = window.__live;
    if (live.kept[kind] >= KEEP_S * live.sampleRate) return;
    live[kind].push(samples.slice(0));
    live.kept[kind] += samples.length;
  }

  function onFrame(r, frame) {
    // With a reference, frames interleave the microphone and the reference: the meter and `sent` keep the microphone.
    const mic = r.echo ? frame.filter((_, i) => i % 2 === 0) : frame;
    r.inDb = Math.max(levelDb(mic), r.inDb - 3);
    if (!r.ready || r.stopping || r.ws.readyState !== WebSocket.OPEN) return;
    keep('sent', mic);
    // pcm_f32le: a Float32Array's bytes are little-endian on every platform browsers run on.
    r.ws.send(frame.buffer);
    r.sendTimes[(r.sentSamples / r.frameSamples) % r.sendTimes.length] = performance.now();
    r.sentSamples += mic.length;
  }

  function onAudio(r, buf) {
    const samples = new Float32Array(buf);
    keep('received', samples);
    r.outDb = Math.max(levelDb(samples), r.outDb - 3);
    // Output sample n is input n denoised, held back by at most the model delay; the round trip is what came on top:
    // the time since the frame holding input n + that delay was sent (for the message's first sample, which waited
    // longest; 0 when that frame is not even sent yet: the declared delay is the model's worst case).
    const frame = Math.floor((r.receivedSamples + r.latencySamples) / r.frameSamples);
    const sentFrames = r.sentSamples / r.frameSamples;
    const now = performance.now();
    if (frame >= sentFrames) r.rtts.push([now, 0]);
    else if (frame >= sentFrames - r.sendTimes.length) r.rtts.push([now, now - r.sendTimes[frame % r.sendTimes.length]]);
    while (r.rtts.length && r.rtts[0][0] < now - 2000) r.rtts.shift();
    r.receivedSamples += samples.length;
    if (!r.stopping) r.playback.port.postMessage(samples, [samples.buffer]);
  }

  function onText(r, text) {
    let msg;
    try { msg = JSON.parse(text); } catch { return; }
    if (msg.type === 'ready') {
      r.ready = msg;
      window.__live.ready = msg;
      r.requestId = msg.request_id;
      r.latencySamples = typeof msg.latency_samples === 'number' ? msg.latency_samples : Math.round((msg.latency_ms * r.rate) / 1000);
      $('#live-model-delay').textContent = `${msg.latency_ms} ms`;
      setStatus('streaming', `Streaming with ${msg.model}${msg.echo_reference ? ', cancelling the sample\'s echo' : ''}.`);
    } else if (msg.type === 'done') {
      r.done = msg.stats;
      window.__live.done = msg.stats;
    } else if (msg.type === 'error') {
      r.error = `${msg.error.type}: ${msg.error.message}`;
    }
  }

  async function onClose(r, e) {
    const wasReady = !!r.ready;
    teardown(r);
    if (r.done) {
      const s = r.done;
      setStatus('stopped', `Stopped: ${s.input_seconds.toFixed(1)} s streamed, ${s.credits_charged} credit${s.credits_charged === 1 ? '' : 's'}.`);
    } else if (r.error) {
      setStatus('error', `The stream ended (close ${e.code}): ${r.error}`, true);
    } else if (!wasReady) {
      // A refused upgrade reaches the page only as a failed connection: the reason is in the request log.
      setStatus('connecting', 'The server refused the stream; looking up why…');
      const why = await refusalReason(r);
      if (run === null) setStatus('error', `The server refused the stream${why ? `: ${why}` : ' (see the workspace\'s request log).'}`, true);
    } else {
      setStatus('error', `The connection closed (code ${e.code}${e.reason ? `, ${e.reason}` : ''}).`, true);
    }
  }

  /** The request log's row for a refused upgrade with this key (written as the refusal goes out, so it may lag a little). */
  async function refusalReason(r) {
    for (let i = 0; i < 3; i++) {
      try {
        const out = await h.api('GET', `requests?key=${encodeURIComponent(r.keyId)}&limit=1`);
        const row = out.requests[0];
        if (row && Date.parse(row.time) >= r.t0 - 1000 && row.status >= 400) {
          return `${row.status} ${row.error_type || ''}${row.error_message ? ` — ${row.error_message}` : ''} (request ${row.request_id})`;
        }
      } catch { /* no reason to show */ }
      await new Promise((res) => setTimeout(res, 300));
    }
    return null;
  }

  /** Stop: no more microphone; the server flushes the rest, sends "done" and closes (onClose tears down). */
  function stop() {
    const r = run;
    if (!r || r.stopping) return;
    r.stopping = true;
    $('#live-stop').disabled = true;
    if (r.capture) r.capture.port.postMessage('stop');
    if (r.ws && r.ws.readyState === WebSocket.OPEN) {
      setStatus('stopping', 'Stopping…');
      r.ws.send(JSON.stringify({ type: 'end' }));
    } else if (r.ws && r.ws.readyState === WebSocket.CONNECTING) {
      r.ws.close();
    } else {
      teardown(r);
      setStatus('stopped', 'Stopped.');
    }
  }

  function teardown(r) {
    if (r.ended) return;
    r.ended = true;
    r.stopping = true;
    if (r.mic) r.mic.getTracks().forEach((t) => t.stop());
    if (r.ctx) r.ctx.close().catch(() => undefined);
    if (r.ws && r.ws.readyState <= WebSocket.OPEN) r.ws.close();
    if (run === r) run = null;
    setRunning(false);
  }

  function median(xs) {
    if (!xs.length) return null;
    const s = xs.slice().sort((a, b) => a - b);
    return s[Math.floor(s.length / 2)];
  }

  /** The meters and numbers, once per display frame while the stream runs. */
  function paint(r) {
    const bar = (id, db) => {
      const pct = Math.round(((db - METER_FLOOR_DB) / -METER_FLOOR_DB) * 100);
      const fill = $(`#${id}-fill`);
      fill.style.width = `${pct}%`;
      // The colour scale spans the whole meter, whatever part of it is lit.
      if (pct > 0) fill.style.backgroundSize = `${(100 * 100) / pct}% 100%`;
      $(`#${id}-meter`).setAttribute('aria-valuenow', String(Math.round(db)));
      // Below the meter's floor the level is not −∞ (only digital silence is): it is quieter than the scale shows.
      $(`#${id}-db`).textContent = r.ended ? 'silent' : db <= METER_FLOOR_DB ? `< ${METER_FLOOR_DB} dB`.replace('-', '−') : `${Math.round(db)} dB`.replace('-', '−');
    };
    bar('live-in', r.ended ? METER_FLOOR_DB : r.inDb);
    bar('live-out', r.ended ? METER_FLOOR_DB : r.outDb);
    if (r.ended) return;
    r.inDb -= 1.5; // fall back between frames (peak meter decay)
    r.outDb -= 1.5;
    const rtt = median(r.rtts.map((x) => x[1]));
    const bufferMs = (r.player.bufferedSamples * 1000) / r.rate;
    $('#live-rtt').textContent = rtt === null ? '—' : `${Math.round(rtt)} ms`;
    $('#live-buffer').textContent = r.ready ? `${Math.round(bufferMs)} ms` : '—';
    if (r.ready && rtt !== null) {
      const device = ((r.ctx.baseLatency || 0) + (r.ctx.outputLatency || 0)) * 1000;
      $('#live-total').textContent = `${Math.round(FRAME_MS + r.ready.latency_ms + rtt + bufferMs + device)} ms`;
    }
    const parts = [];
    if (r.requestId) parts.push(`request ${r.requestId}`);
    parts.push(`${r.rate / 1000} kHz pcm_f32le`, `${(r.sentSamples / r.rate).toFixed(1)} s streamed`);
    parts.push(`${r.player.underruns} underrun${r.player.underruns === 1 ? '' : 's'}`);
    $('#live-info').textContent = parts.join(' · ');
    requestAnimationFrame(() => paint(r));
  }

  window.NSLivePage = {
    load,
    /** Another page is shown or the session ended: a running stream stops. */
    leave() { if (run) stop(); },
  };
})();
