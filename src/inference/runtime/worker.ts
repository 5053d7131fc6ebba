// Inference worker thread: one ONNX Runtime session per graph, created once; hosts the streams pinned to it.
// The pool may post a request before the previous one is answered; requests run one at a time, in arrival order, so
// streams on a worker never run concurrently and replies come back in order. Per-sample work around the chain that
// would otherwise fall on the server's main thread runs here too: loudness metering, and for PCM streams the decoding
// of the input bytes and the dither and 16-bit rounding of the output, speech detection on the output (src/vad:
// speech_segments, trim_silence), whose graph is loaded at the first stream that asks for it, and echo cancellation
// in front of the model's 16 kHz chain (echo_reference: echo-front.ts).
import { parentPort, workerData } from 'node:worker_threads';
import type * as ort from 'onnxruntime-node';
import { LoudnessMeter } from '../../dsp/loudness';
import { createChain } from '../models/chains';
import { DtlnGraphs } from '../models/dtln';
import { PcmEdges } from '../models/pcm-edges';
import { loadGraphs, removeOrtDebugLog } from './sessions';
import { LiveHost } from '../live/host';
import { AlignedStream, dryMixForLimit } from '../models/aligned-stream';
import { idleThisThread, niceThisThread, threadId, type ThreadPriority } from './thread-priority';
import { concatAll } from '../../dsp/concat';
import { loadVadSession } from '../../vad/silero';
import { SpeechTrack } from '../../vad/speech-track';
import { spansItsBuffer, type ToWorker, type FromWorker } from './protocol';
import { packLive, packedTransfer, unpackLive } from '../live/packing';
import { warmScene } from '../../dsp/aec';

/** Seconds of the echo warm-up scene (live workers). */
const ECHO_WARM_SECONDS = 3;

interface WorkerInit {
  modelsDir: string;
  warmUp: boolean;
  /**
   * Priority of this thread (file workers: FILE_WORK_NICE, FILE_WORK_IDLE; live workers as the server): set before the
   * graphs load, so ONNX Runtime's own threads inherit it.
   */
  nice: number;
  idle: boolean;
  /** A live worker: its warm-up also runs an echo stream (echo-front.ts). */
  live?: boolean;
}

const port = parentPort;
if (!port) throw new Error('worker.ts must run as a worker thread');

/**
 * A stream hosted here, with its loudness meters when the caller asked for them (measureLoudness): metering runs on
 * this thread, which the pool scales with cores, rather than on the server's one main thread (docs/engine.md).
 */
interface Hosted {
  stream: AlignedStream;
  meters: { input: LoudnessMeter; output: LoudnessMeter } | null;
  /** Streams opened with pcmInput (PcmDenoiseStream): how their bytes are decoded, and the output's dither. */
  pcm: PcmEdges | null;
  /** Streams opened with speech detection; with trimming, `alignedMeter` meters the output before the cuts. */
  speech: SpeechTrack | null;
  alignedMeter: LoudnessMeter | null;
  /** Streams opened with echoReference: the input is the microphone channels, then the reference. */
  echo: { channels: number } | null;
}

const streams = new Map<number, Hosted>();
let graphs: DtlnGraphs | null = null;
let priority: ThreadPriority = { tid: threadId(), nice: 0, idle: false };
let live: LiveHost | null = null;
let modelsDir = '';
let vadSession: Promise<ort.InferenceSession> | null = null;

function vad(): Promise<ort.InferenceSession> {
  vadSession ??= loadVadSession(modelsDir).then((session) => (removeOrtDebugLog(), session)); // as loadGraphs does
  vadSession.catch(() => (vadSession = null)); // a missing graph is reported to that stream; a later one tries again
  return vadSession;
}

function send(msg: FromWorker, transfer: ArrayBuffer[] = []): void {
  port!.postMessage(msg, transfer);
}

function transferList(planar: Array<Float32Array | Float64Array | Uint8Array>): ArrayBuffer[] {
  const seen = new Set<ArrayBuffer>();
  for (const ch of planar) seen.add(ch.buffer as ArrayBuffer);
  return [...seen];
}

function joinPlanar(a: Float32Array[], b: Float32Array[]): Float32Array[] {
  if (b[0].length === 0) return a;
  if (a[0].length === 0) return b;
  return a.map((ch, c) => concatAll([ch, b[c]]));
}

/** Outputs are often views into larger arrays; copy those so only the bytes returned are transferred. */
function compact(planar: Float32Array[]): Float32Array[] {
  return planar.map((ch) => (spansItsBuffer(ch) ? ch : ch.slice()));
}

async function handle(msg: ToWorker): Promise<void> {
  switch (msg.type) {
    case 'open': {
      if (msg.echoReference && msg.pcmInput) throw new Error('echo cancellation takes planar input, not PCM edges');
      const chain = createChain(msg.model, msg.channels, graphs!, { fullBand: msg.fullBand, narrowBand: msg.narrowBand, echoReference: msg.echoReference });
      const meter = (): LoudnessMeter => new LoudnessMeter(chain.sampleRate, msg.channels);
      // The VAD's gate compares the output with the input it lines up with (the denoiser's own output: the limit's mix undone).
      const speech = msg.speech
        ? new SpeechTrack(await vad(), msg.speech, chain.sampleRate, msg.channels, { withInput: true, dryMix: dryMixForLimit(msg.attenuationLimitDb) })
        : null;
      streams.set(msg.streamId, {
        stream: new AlignedStream(chain, msg.attenuationLimitDb),
        meters: msg.measureLoudness ? { input: meter(), output: meter() } : null,
        pcm: msg.pcmInput ? new PcmEdges(msg.pcmInput, msg.channels, chain.sampleRate) : null,
        speech,
        alignedMeter: msg.measureLoudness && msg.speech?.trimMaxPauseS != null ? meter() : null,
        echo: msg.echoReference ? { channels: msg.channels } : null,
      });
      send({ type: 'result', reqId: msg.reqId, planar: [] });
      return;
    }
    case 'push':
    case 'push-pcm':
    case 'end': {
      const hosted = streams.get(msg.streamId);
      if (!hosted) throw new Error(`unknown stream ${msg.streamId}`);
      const { stream, meters, pcm, speech, alignedMeter, echo } = hosted;
      let input: Float32Array[] | null = null;
      if (msg.type === 'push') input = msg.planar;
      else if (msg.type === 'push-pcm') {
        if (!pcm) throw new Error(`stream ${msg.streamId} was not opened for PCM`);
        input = pcm.decode(msg.bytes);
      }
      // The input is metered as it came (the microphone, before the canceller), before the chain, which may reuse the
      // arrays; the VAD's gate compares the output with the same microphone (echo the canceller removed is not speech).
      if (input) {
        const mic = echo ? input.slice(0, echo.channels) : input;
        meters?.input.push(mic);
        speech?.input(mic);
      }
      let raw = input ? await stream.push(input) : await stream.end();
      if (speech) {
        alignedMeter?.push(raw);
        raw = await speech.process(raw);
        if (msg.type === 'end') raw = joinPlanar(raw, await speech.finish());
      }
      const out = pcm ? raw : compact(raw); // views are copied only where they are transferred
      meters?.output.push(out);
      // PCM streams get the output as the WAV sink would write it; the float arrays stay here.
      const encoded = pcm ? pcm.encode(out) : undefined;
      const reply: Extract<FromWorker, { type: 'result' }> = encoded
        ? { type: 'result', reqId: msg.reqId, planar: [], pcm: encoded }
        : { type: 'result', reqId: msg.reqId, planar: out };
      const moved: Array<Float32Array | Float64Array | Uint8Array> = encoded ? [encoded] : [...out];
      if (msg.type === 'end') {
        streams.delete(msg.streamId);
        if (meters) {
          reply.loudness = { input: meters.input.blockPowers(), output: meters.output.blockPowers() };
          moved.push(reply.loudness.input, reply.loudness.output);
          if (alignedMeter) moved.push((reply.loudness.alignedOutput = alignedMeter.blockPowers()));
        }
        if (speech) moved.push((reply.speech = speech.report()).segments);
        if (echo) reply.echo = stream.echoStats() ?? undefined;
        stream.release();
      }
      send(reply, transferList(moved));
      return;
    }
    case 'abort':
      // A push of this stream still awaiting its model has run its canceller part already (process() is synchronous
      // up to the model); a later one finds the stream gone.
      streams.get(msg.streamId)?.stream.release();
      streams.delete(msg.streamId);
      return;
    case 'crash':
      // Test hook (normally handled on arrival): die the way a native fault would, without cleanup.
      process.exit(70);
  }
}

async function handleLive(msg: Extract<ToWorker, { type: 'live-open' | 'live-tick' | 'live-abort' }>): Promise<void> {
  const host = live!;
  try {
    if (msg.type === 'live-open') {
      const opened = host.open(msg.open, msg.open.vad ? await vad() : undefined);
      send({ type: 'live-opened', reqId: msg.reqId, ...opened });
    } else if (msg.type === 'live-abort') {
      host.abort(msg.streamId);
    } else {
      const packed = packLive(await host.tick(unpackLive(msg.packed)));
      const due = host.vadDueMs();
      if (due !== undefined) packed.vadDueMs = due;
      send({ type: 'live-result', reqId: msg.reqId, packed }, packedTransfer(packed));
    }
  } catch (err) {
    if ('reqId' in msg) send({ type: 'error', reqId: msg.reqId, message: (err as Error).message });
  }
}

/**
 * Runs half a second of audio through the default chain before the worker reports ready, so that the first request
 * does not pay for ONNX Runtime's first-run allocations and the first JIT tier alone (servers; the CLI skips it).
 */
async function warmUp(g: DtlnGraphs): Promise<void> {
  let seed = 12345;
  const noise = (n: number): Float32Array => {
    const x = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      seed = (seed * 1103515245 + 12345) >>> 0;
      x[i] = (seed / 4294967296 - 0.5) * 0.02;
    }
    return x;
  };
  const stream = new AlignedStream(createChain('nsm-2', 1, g), 0);
  await stream.push([noise(8000)]);
  await stream.end();
}

/**
 * A live worker's warm-up for echo streams: a generated scene (warm-scene.ts) through a throwaway echo chain in 20 ms
 * chunks, as streams send them, so that V8 has optimised the canceller's code, with type feedback from every path of
 * its hop, before the first real echo stream: otherwise a path met for the first time mid-stream deoptimised the code
 * that every canceller of the worker shares, and all of them ran slow at once (docs/echo.md, Live streams). The
 * throwaway cancellers give their heap slots back at the end (release(), whose path is then warm too).
 */
async function warmUpEcho(g: DtlnGraphs): Promise<void> {
  // V8 sizes a class's objects from its first few (slack tracking, 7 constructions): code optimised before that
  // finished met objects of another map afterwards, and `EchoCanceller.hop` deoptimised with "wrong map" at every new
  // stream's first hops (146–662 times in 10 s of 40 streams). So the chains are built that often first.
  const built = Array.from({ length: 8 }, () => new AlignedStream(createChain('nsm-2', 1, g, { echoReference: true }), 0));
  const { mic, ref } = warmScene(ECHO_WARM_SECONDS);
  const stream = new AlignedStream(createChain('nsm-2', 1, g, { echoReference: true }), 0);
  for (let at = 0; at < mic.length; at += 320) await stream.push([mic.subarray(at, at + 320), ref.subarray(at, at + 320)]);
  await stream.end();
  stream.echoStats();
  for (const s of [...built, stream]) s.release();
}

async function main(): Promise<void> {
  try {
    const init = workerData as WorkerInit;
    modelsDir = init.modelsDir;
    // Niceness at once, SCHED_IDLE only once the models are loaded and warm: under SCHED_IDLE the start-up would get
    // only CPU time no normal thread of the box wants, and a server waits for its file workers before it listens (on a
    // box other programs kept busy it did not listen until they stopped).
    if (init.nice > 0) priority = { ...priority, nice: niceThisThread(init.nice) };
    graphs = await loadGraphs(init.modelsDir);
    if (init.warmUp) await warmUp(graphs);
    if (init.warmUp && init.live) await warmUpEcho(graphs);
    if (init.idle) priority = { ...priority, idle: await idleThisThread() };
  } catch (err) {
    send({ type: 'init-error', message: (err as Error).message });
    return;
  }
  let previous: Promise<void> = Promise.resolve();
  live = new LiveHost(graphs);
  port!.on('message', (msg: ToWorker) => {
    // Test hook: at once, even mid-request, as a native crash would.
    if (msg.type === 'crash') process.exit(70);
    if (msg.type === 'live-open' || msg.type === 'live-tick' || msg.type === 'live-abort') {
      // A live worker gets no file requests (engine.ts); handled on arrival all the same.
      void handleLive(msg);
      return;
    }
    previous = previous.then(() =>
      handle(msg).catch((err: Error) => {
        if ('reqId' in msg) send({ type: 'error', reqId: msg.reqId, message: err.message });
      }),
    );
  });
  send({ type: 'ready', priority });
}

void main();
