// One live stream paced in real time, as a call or a voice agent sends it (for the soak): 20 ms frames of 16 kHz mono
// s16 every 20 ms for the chosen duration, then `end`. It counts underruns as `npm run bench -- --stream` does
// (scripts/bench/stream.ts): output sample n is due once the frame holding input sample n + the declared delay was
// sent; a 20 ms output frame arriving more than UNDERRUN_MS after that is an underrun.
import WebSocket from 'ws';
import { UNDERRUN_MS } from '../bench/stream';

const FRAME_MS = 20;
const RATE = 16000;
const FRAME_SAMPLES = (RATE * FRAME_MS) / 1000;

export interface PacedResult {
  /** Seconds of audio sent before `end`. */
  sentSeconds: number;
  /** Close code, or the HTTP status of a refused upgrade. */
  code: number;
  refused: boolean;
  done: { credits_charged: number; input_seconds: number } | null;
  errors: string[];
  outFrames: number;
  underruns: number;
  maxLateMs: number;
  /** speech_start/speech_end messages received (vad). */
  speechEvents: number;
}

/**
 * 'vad': speech events on; 'echo': a second channel, the same speech from half the clip away, as the echo reference;
 * 'echo-vad': both.
 */
export type PacedVariant = 'plain' | 'vad' | 'echo' | 'echo-vad';

/** Frame k of `pcm` (looped), or for 'echo' that frame interleaved with the reference's. */
function frameOf(pcm: Buffer, pcmFrames: number, k: number, echo: boolean): Buffer {
  const at = (j: number): Buffer => pcm.subarray((j % pcmFrames) * FRAME_SAMPLES * 2, ((j % pcmFrames) + 1) * FRAME_SAMPLES * 2);
  if (!echo) return at(k);
  const mic = at(k);
  const ref = at(k + Math.floor(pcmFrames / 2));
  const out = Buffer.alloc(FRAME_SAMPLES * 4);
  for (let i = 0; i < FRAME_SAMPLES; i++) {
    out.writeInt16LE(mic.readInt16LE(2 * i), 4 * i);
    out.writeInt16LE(ref.readInt16LE(2 * i), 4 * i + 2);
  }
  return out;
}

/** Streams `seconds` of `pcm` (looped) through `model` at real-time pace; resolves when the stream has closed. */
export function pacedStream(port: number, token: string, pcm: Buffer, seconds: number, model = 'nsm-2', variant: PacedVariant = 'plain'): Promise<PacedResult> {
  return new Promise((resolve) => {
    const r: PacedResult = { sentSeconds: 0, code: 0, refused: false, done: null, errors: [], outFrames: 0, underruns: 0, maxLateMs: 0, speechEvents: 0 };
    const echo = variant === 'echo' || variant === 'echo-vad';
    const extra = `${echo ? '&channels=2&echo_reference=last' : ''}${variant === 'vad' || variant === 'echo-vad' ? '&vad=true' : ''}`;
    const ws = new WebSocket(`ws://127.0.0.1:${port}/v1/noise-suppressor/stream?model=${model}${extra}`, { headers: { Authorization: `Bearer ${token}` }, perMessageDeflate: false });
    const frames = Math.round((seconds * 1000) / FRAME_MS);
    const pcmFrames = Math.floor(pcm.length / (FRAME_SAMPLES * 2));
    const sendTimes: number[] = [];
    let delay = 0;
    let outSamples = 0;
    let timer: NodeJS.Timeout | null = null;
    ws.on('error', () => undefined);
    ws.on('unexpected-response', (_q, res) => {
      r.refused = true;
      r.code = res.statusCode ?? 0;
      res.resume();
    });
    const pace = (start: number): void => {
      const due = Math.min(frames, Math.floor((performance.now() - start) / FRAME_MS) + 1);
      while (sendTimes.length < due && ws.readyState === WebSocket.OPEN) {
        const k = sendTimes.length;
        sendTimes.push(performance.now());
        ws.send(frameOf(pcm, pcmFrames, k, echo));
      }
      if (sendTimes.length >= frames) {
        r.sentSeconds = (sendTimes.length * FRAME_MS) / 1000;
        if (ws.readyState === WebSocket.OPEN) ws.send('{"type":"end"}');
        return;
      }
      if (ws.readyState === WebSocket.OPEN) timer = setTimeout(() => pace(start), 5);
    };
    ws.on('message', (data, isBinary) => {
      const now = performance.now();
      if (!isBinary) {
        const msg = JSON.parse(String(data)) as { type: string; latency_samples?: number; stats?: PacedResult['done']; error?: { type: string } };
        if (msg.type === 'ready') {
          delay = msg.latency_samples ?? 0;
          pace(performance.now());
        } else if (msg.type === 'done') r.done = msg.stats ?? null;
        else if (msg.type === 'speech_start' || msg.type === 'speech_end') r.speechEvents++;
        else if (msg.type === 'error') r.errors.push(msg.error?.type ?? 'error');
        return;
      }
      const n = (data as Buffer).length / 2;
      // Samples [a, a + n): sample s is due when the frame holding input sample s + delay was sent.
      for (let s = outSamples; s < outSamples + n; ) {
        const k = Math.floor((s + delay) / FRAME_SAMPLES);
        const end = Math.min(outSamples + n, (k + 1) * FRAME_SAMPLES - delay);
        const sentAt = sendTimes[k];
        const late = sentAt === undefined ? 0 : Math.max(0, now - sentAt);
        if (late > r.maxLateMs) r.maxLateMs = late;
        if (late > UNDERRUN_MS && end - s >= FRAME_SAMPLES / 2) r.underruns++;
        s = end;
      }
      outSamples += n;
      r.outFrames = outSamples / FRAME_SAMPLES;
    });
    ws.on('close', (code) => {
      if (timer) clearTimeout(timer);
      if (!r.refused) r.code = code;
      if (r.sentSeconds === 0) r.sentSeconds = (sendTimes.length * FRAME_MS) / 1000;
      resolve(r);
    });
  });
}
