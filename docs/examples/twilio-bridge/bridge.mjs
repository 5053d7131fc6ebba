// A telephony bridge: Twilio Media Streams in, denoised caller audio out to a voice agent.
//
// Twilio connects its <Connect><Stream> (or <Start><Stream>) WebSocket here and sends `connected`, `start`, `media`
// (base64 μ-law, 8 kHz mono, 20 ms per message), `mark`, `dtmf` and `stop`. For each call the bridge opens a live
// stream of the noise-suppression service (nsm-client) and a WebSocket to the agent (AGENT_URL), and forwards to the
// agent the same Twilio-shaped messages with the caller's audio denoised. Output sample n of the service is input
// sample n, so every non-audio message (mark, dtmf, ...) is forwarded exactly where it sat in the caller's audio, and
// `stop` after the last of it. Whatever the agent sends (media, mark, clear for the caller to hear) goes back to
// Twilio unchanged.
//
// Fail-open: if the service refuses the stream (no credits, too many streams) or the stream breaks mid-call, the
// caller's audio is forwarded as it came (from the first sample not yet denoised), so the call goes on.
//
// Anyone can reach the bridge's port, not only Twilio, so what arrives is checked before it is used: messages are at
// most MAX_MESSAGE bytes, `start` must come (after `connected`) within START_TIMEOUT_MS and only once, a message the
// bridge forwards must serialise again, and anything unexpected closes that call only (1008 or 1011), never the process.
//
// Encoding: the stream carries Twilio's μ-law as it is (`encoding=mulaw`, the default). For a server older than
// μ-law streams, pass { encoding: 'pcm_s16le' } (or set NSM_STREAM_ENCODING=pcm_s16le): the bridge then decodes μ-law
// to 16-bit PCM at 8 kHz (alawmulaw) and encodes the answer back, which gives the same bytes.
import { WebSocketServer, WebSocket } from 'ws';
import alawmulaw from 'alawmulaw';
import { NsmClient } from 'nsm-client';

const { mulaw } = alawmulaw;
const RATE = 8000;
const CHUNK = 160; // 20 ms of 8 kHz μ-law, Twilio's own message size
// Twilio's messages are under 1 KB (a 20 ms media message ~300 bytes; `start` grows with customParameters).
const MAX_MESSAGE = 64 * 1024;
const START_TIMEOUT_MS = 10_000; // Twilio sends `connected` and `start` as soon as the socket opens
const AGENT_HANDSHAKE_MS = 10_000; // an agent that does not answer ends the call instead of queueing its audio

/** A protocol error from the Twilio side: the call is closed with 1008 and this reason. */
class Refused extends Error {}

/** μ-law bytes → 16-bit little-endian PCM bytes. */
function mulawToPcm(bytes) {
  const samples = mulaw.decode(bytes);
  return new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength);
}

/** 16-bit little-endian PCM bytes → μ-law bytes. */
function pcmToMulaw(bytes) {
  const copy = bytes.byteOffset % 2 === 0 ? bytes : bytes.slice();
  return mulaw.encode(new Int16Array(copy.buffer, copy.byteOffset, copy.byteLength / 2));
}

function concat(a, b) {
  if (a.length === 0) return b;
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

/** The caller's own audio (the other party's, with <Start><Stream track="both_tracks">, is not ours to clean). */
function isInbound(msg) {
  const track = msg.media?.track ?? 'inbound';
  return track === 'inbound' || track === 'inbound_track';
}

/**
 * One call: the Twilio socket, the service's stream and the agent's socket.
 * Positions are counted in samples of the caller's audio (1 μ-law byte = 1 sample).
 */
class Call {
  constructor(twilio, opts) {
    this.twilio = twilio;
    this.opts = opts;
    this.log = opts.log;
    this.streamSid = null;
    this.agent = null;
    this.agentQueue = []; // messages for the agent until its socket is open
    this.nsm = null;
    this.passthrough = false;
    this.inSamples = 0; // caller audio received
    this.outSamples = 0; // audio forwarded to the agent
    this.unanswered = new Uint8Array(0); // caller μ-law not yet matched by denoised output (for fail-open)
    this.outBuffer = new Uint8Array(0); // denoised μ-law not yet forwarded
    this.events = []; // {at, msg}: non-audio messages, in order, each at its position in the audio
    this.seq = 1;
    this.chunk = 1;
    this.stopped = false;
    this.started = false;
  }

  /** One text message from the Twilio side; whatever goes wrong closes this call only. */
  onTwilioMessage(text) {
    try {
      this.handle(text);
    } catch (err) {
      const refused = err instanceof Refused;
      this.log(`call ${this.streamSid ?? '(not started)'}: ${refused ? 'closed' : 'failed'}: ${err.message}`);
      if (this.twilio.readyState === WebSocket.OPEN) this.twilio.close(refused ? 1008 : 1011, refused ? err.message.slice(0, 120) : 'bridge error');
    }
  }

  handle(text) {
    let msg;
    try {
      msg = JSON.parse(text);
    } catch {
      return; // not JSON: not Twilio's
    }
    if (!msg || typeof msg !== 'object' || typeof msg.event !== 'string' || this.stopped) return; // stop is the last
    if (msg.event !== 'media' || !isInbound(msg)) {
      // Forwarded as it is, later and from other callbacks: it must serialise now (a 30,000-deep array does not).
      try {
        JSON.stringify(msg);
      } catch {
        throw new Refused(`a ${msg.event.slice(0, 20)} message that cannot be forwarded`);
      }
    }
    if (!this.started && msg.event !== 'connected' && msg.event !== 'start') throw new Refused(`${msg.event.slice(0, 20)} before start`);
    switch (msg.event) {
      case 'connected':
        this.toAgent(msg);
        break;
      case 'start':
        if (this.started) throw new Refused('a second start');
        this.started = true;
        this.start(msg);
        break;
      case 'media':
        this.media(msg);
        break;
      case 'stop':
        this.stop(msg);
        break;
      default:
        // mark, dtmf and anything later: at its place in the audio
        this.events.push({ at: this.inSamples, msg });
        this.flush(false);
    }
  }

  start(msg) {
    const sid = msg.start?.streamSid ?? msg.streamSid;
    this.streamSid = typeof sid === 'string' ? sid.slice(0, 64) : null;
    const fmt = msg.start?.mediaFormat ?? {};
    if ((fmt.encoding && fmt.encoding !== 'audio/x-mulaw') || (fmt.sampleRate && fmt.sampleRate !== RATE) || (fmt.channels && fmt.channels !== 1)) {
      this.log(`call ${this.streamSid}: unexpected media format ${JSON.stringify(fmt)}; forwarding it untouched`);
      this.passthrough = true;
    }
    this.openAgent();
    this.toAgent(msg); // the agent learns the call (callSid, customParameters) from it
    if (!this.passthrough) this.openStream();
  }

  openAgent() {
    const url = new URL(this.opts.agentUrl);
    const agent = new WebSocket(url, { perMessageDeflate: false, handshakeTimeout: AGENT_HANDSHAKE_MS });
    this.agent = agent;
    agent.on('open', () => {
      for (const m of this.agentQueue) agent.send(m);
      this.agentQueue = [];
    });
    // What the agent says (media to play, mark, clear) goes to Twilio as it is.
    agent.on('message', (data, isBinary) => {
      if (!isBinary && this.twilio.readyState === WebSocket.OPEN) this.twilio.send(data.toString());
    });
    agent.on('error', (err) => this.log(`call ${this.streamSid}: agent connection: ${err.message}`));
    agent.on('close', () => {
      if (!this.stopped) this.twilio.close(1000, 'agent closed');
    });
  }

  openStream() {
    const encoding = this.opts.encoding;
    this.nsm = this.opts.client.streams.open({ model: this.opts.model, sample_rate: RATE, channels: 1, encoding });
    this.nsm.on('audio', (bytes) => {
      const ulaw = encoding === 'mulaw' ? bytes : pcmToMulaw(bytes);
      this.unanswered = this.unanswered.subarray(Math.min(ulaw.length, this.unanswered.length));
      this.outBuffer = concat(this.outBuffer, ulaw);
      this.flush(false);
    });
    this.nsm.on('message', (m) => {
      if (m.type !== 'ready' && m.type !== 'done' && m.type !== 'error') this.opts.onServerMessage?.(this, m);
    });
    this.nsm.ready.then(
      (r) => this.log(`call ${this.streamSid}: denoising with ${r.model} (${r.encoding}), ${r.latency_ms} ms model delay`),
      () => undefined,
    );
    this.nsm.done.catch((err) => this.failOpen(err));
  }

  /** The service is not there (refused, broken): forward the caller's own audio from where the output stopped. */
  failOpen(err) {
    if (this.passthrough) return;
    this.log(`call ${this.streamSid}: noise suppression unavailable (${err.type ?? 'error'}: ${err.message}); forwarding the caller's audio untouched`);
    this.passthrough = true;
    this.outBuffer = concat(this.outBuffer, this.unanswered);
    this.unanswered = new Uint8Array(0);
    this.flush(this.stopped);
    if (this.stopped) this.finish();
  }

  media(msg) {
    const payload = typeof msg.media?.payload === 'string' ? msg.media.payload : '';
    if (!isInbound(msg)) {
      // the other party's audio (<Start><Stream track="both_tracks">): not ours to clean
      this.events.push({ at: this.inSamples, msg });
      this.flush(false);
      return;
    }
    const ulaw = new Uint8Array(Buffer.from(payload, 'base64'));
    this.inSamples += ulaw.length;
    if (this.passthrough) {
      this.outBuffer = concat(this.outBuffer, ulaw);
      this.flush(false);
      return;
    }
    this.unanswered = concat(this.unanswered, ulaw);
    const pcm = this.opts.encoding === 'mulaw' ? ulaw : mulawToPcm(ulaw);
    this.nsm.write(pcm).catch(() => undefined); // a failure shows in done (failOpen)
  }

  async stop(msg) {
    this.stopped = true;
    this.events.push({ at: this.inSamples, msg });
    if (this.passthrough || !this.nsm) return this.finish();
    try {
      const done = await this.nsm.end(); // all output has arrived: total output = total input
      this.log(`call ${this.streamSid}: ${done.stats.input_seconds} s denoised, ${done.stats.credits_charged} credit(s)`);
      this.finish();
    } catch {
      // failOpen has forwarded the rest and finished
    }
  }

  finish() {
    this.flush(true);
    if (this.agent && this.agent.readyState <= WebSocket.OPEN) {
      const close = () => this.agent.close(1000, 'call ended');
      if (this.agent.readyState === WebSocket.OPEN) close();
      else this.agent.once('open', close);
    }
  }

  /** Forwards the denoised audio and the events, each event right after the audio that preceded it. */
  flush(final) {
    for (;;) {
      const next = this.events[0];
      const limit = next ? next.at : Infinity;
      // audio up to the next event (whole 20 ms chunks unless an event or the end cuts one short)
      while (this.outSamples < limit && this.outBuffer.length > 0) {
        const room = Math.min(limit - this.outSamples, CHUNK);
        if (this.outBuffer.length < room && !final) break;
        const n = Math.min(room, this.outBuffer.length);
        this.sendMedia(this.outBuffer.subarray(0, n));
        this.outBuffer = this.outBuffer.subarray(n);
      }
      if (!next || this.outSamples < next.at) return;
      this.events.shift();
      this.toAgent(next.msg);
    }
  }

  sendMedia(ulaw) {
    this.toAgent({
      event: 'media',
      streamSid: this.streamSid,
      media: { track: 'inbound', chunk: String(this.chunk++), timestamp: String(Math.round((this.outSamples * 1000) / RATE)), payload: Buffer.from(ulaw).toString('base64') },
    });
    this.outSamples += ulaw.length;
  }

  toAgent(msg) {
    // Renumbered: the agent sees one gap-free sequence, as from Twilio.
    const out = msg.event === 'connected' ? msg : { ...msg, sequenceNumber: String(this.seq++) };
    const text = JSON.stringify(out);
    if (this.agent?.readyState === WebSocket.OPEN) this.agent.send(text);
    else this.agentQueue.push(text);
  }

  onTwilioClose() {
    if (!this.stopped) {
      // Hung up without a stop: end the stream, tell the agent nothing more comes.
      this.stopped = true;
      this.nsm?.close(1000, 'caller gone');
      this.flush(true);
      this.agent?.close(1000, 'caller gone');
    }
  }
}

/**
 * Starts the bridge. Options: nsmUrl, token, agentUrl, model ('nsm-2'), encoding ('mulaw' | 'pcm_s16le'),
 * port (0: any), host ('127.0.0.1'), path ('/twilio'), log (console.log), WebSocket (for nsm-client).
 * Resolves with { port, url, close() }.
 */
export async function startBridge(options) {
  const opts = {
    model: 'nsm-2',
    encoding: 'mulaw', // 'pcm_s16le' for a server without μ-law streams
    host: '127.0.0.1',
    port: 0,
    path: '/twilio',
    log: (line) => console.log(line),
    ...options,
  };
  opts.client = new NsmClient(opts.nsmUrl, opts.token);
  const wss = new WebSocketServer({ host: opts.host, port: opts.port, path: opts.path, perMessageDeflate: false, maxPayload: MAX_MESSAGE });
  await new Promise((resolve, reject) => {
    wss.once('listening', resolve);
    wss.once('error', reject);
  });
  const calls = new Set();
  wss.on('connection', (twilio) => {
    const call = new Call(twilio, opts);
    calls.add(call);
    const startBy = setTimeout(() => {
      if (call.started || twilio.readyState !== WebSocket.OPEN) return;
      opts.log(`call (not started): closed: no start within ${START_TIMEOUT_MS / 1000} s`);
      twilio.close(1008, 'no start');
    }, START_TIMEOUT_MS);
    twilio.on('message', (data, isBinary) => {
      if (!isBinary) call.onTwilioMessage(data.toString());
    });
    twilio.on('close', () => {
      clearTimeout(startBy);
      try {
        call.onTwilioClose();
      } catch (err) {
        opts.log(`call ${call.streamSid}: closing: ${err.message}`);
      }
      calls.delete(call);
    });
    twilio.on('error', () => undefined);
  });
  const port = wss.address().port;
  return {
    port,
    url: `ws://${opts.host}:${port}${opts.path}`,
    close: () =>
      new Promise((resolve) => {
        for (const c of wss.clients) c.terminate();
        wss.close(() => resolve());
      }),
  };
}
