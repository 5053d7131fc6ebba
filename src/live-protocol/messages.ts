// A live stream's text messages (docs/streaming.md, "Messages"), both ends' in one place. Binary messages carry the
// audio; text messages carry everything else:
//   client → server           {"type":"end"}
//   server → client (public)  ready, done, error (below, built by the gateway's session); speech_start and speech_end
//                             with vad=true
//   model service → gateway   ready, done, error, speech_start, speech_end (internal protocol version 1: the relay's
//                             view of a replica)
// A new message is a type in its union and a builder (or a case of a parser) here; both ends then share it.
import type { VadEvent } from '../vad/batch';
import type { EchoReport } from '../inference/types';
import type { StreamFault } from './close';
import { outputChannels, type LiveParams } from './query';

// -- client → server

/** What a client may say in text. */
export type ClientMessage = { type: 'end' };

/** A client's text message read, or why it is refused (the stream then ends with 1007). Never throws. */
export function parseClientText(text: string): { message: ClientMessage } | { refused: string } {
  let msg: unknown;
  try {
    msg = JSON.parse(text);
  } catch {
    return { refused: 'a text message must be JSON: {"type":"end"}' };
  }
  // Any JSON may come: null, a number, an array, an object without a string type.
  const type = msg !== null && typeof msg === 'object' && !Array.isArray(msg) ? (msg as { type?: unknown }).type : undefined;
  if (type === 'end') return { message: { type: 'end' } };
  const got = typeof type === 'string' ? `type ${JSON.stringify(type.slice(0, 40))}` : `a JSON ${msg === null ? 'null' : Array.isArray(msg) ? 'array' : typeof msg}`;
  return { refused: `unknown text message (${got}); send binary PCM or {"type":"end"}` };
}

// -- server → client (the public protocol)

/** A stream's figures in its `done` message. */
export interface DoneStats {
  model: string;
  sample_rate: number;
  input_seconds: number;
  output_seconds: number;
  credits_charged: number;
  bytes_in: number;
  bytes_out: number;
  /** vad=true: seconds of speech and the number of segments, as a file's stats say them. */
  speech_s?: number;
  speech_segment_count?: number;
  /** With echo_reference: the canceller's figures, named as in a file's stats (docs/echo.md, "Stats"). */
  echo_reference?: true;
  echo_reference_active?: boolean;
  echo_delay_ms?: number | null;
  echo_erle_db?: number | null;
}

/** The canceller's figures as the stats name and round them (the file path's too: pipeline/stats.ts). */
export function echoStats(report: EchoReport): Required<Pick<DoneStats, 'echo_reference' | 'echo_reference_active' | 'echo_delay_ms' | 'echo_erle_db'>> {
  const round = (x: number | null, digits: number): number | null => (x === null || !Number.isFinite(x) ? null : Math.round(x * 10 ** digits) / 10 ** digits);
  return {
    echo_reference: true,
    echo_reference_active: report.referenceActive,
    echo_delay_ms: round(report.delayMs, 0),
    echo_erle_db: round(report.erleDb, 1),
  };
}

export interface ReadyMessage {
  type: 'ready';
  request_id: string;
  model: string;
  sample_rate: number;
  encoding: string;
  channels: number;
  latency_ms: number;
  latency_samples: number;
  /** vad=true, with the settings the stream runs with. */
  vad?: true;
  vad_threshold?: number;
  vad_min_speech_ms?: number;
  vad_hangover_ms?: number;
  /** With echo_reference=last: the last input channel is the reference, and the output has one channel less. */
  echo_reference?: true;
  output_channels?: number;
}

/**
 * A speech event (vad=true): where speech starts or ends (at_ms) and the end of the audio that decided it (decided_ms),
 * both ms on the input timeline; sent once the output up to at_ms has been.
 */
export interface SpeechMessage {
  type: 'speech_start' | 'speech_end';
  at_ms: number;
  decided_ms: number;
}

export type ServerMessage =
  | ReadyMessage
  | SpeechMessage
  | { type: 'done'; stats: DoneStats }
  | { type: 'error'; error: { type: string; message: string; request_id: string } };

/** The first message: the stream's settings and its delay (output sample n needs input up to n + latency − 1). */
export function readyMessage(requestId: string, p: LiveParams, latencySamples: number): ReadyMessage {
  return {
    type: 'ready',
    request_id: requestId,
    model: p.model,
    sample_rate: p.sampleRate,
    encoding: p.encoding,
    channels: p.channels,
    latency_ms: Math.round(((latencySamples * 1000) / p.sampleRate) * 100) / 100,
    latency_samples: latencySamples,
    ...(p.vad
      ? { vad: true, vad_threshold: p.vad.threshold, vad_min_speech_ms: p.vad.minSpeechMs, vad_hangover_ms: p.vad.hangoverMs }
      : {}),
    ...(p.echoReference ? { echo_reference: true as const, output_channels: outputChannels(p) } : {}),
  };
}

export function speechMessage(e: VadEvent): SpeechMessage {
  return { type: e.type, at_ms: e.at_ms, decided_ms: e.decided_ms };
}

export function doneMessage(stats: DoneStats): ServerMessage {
  return { type: 'done', stats };
}

/** The message before a fault's close code, in the error envelope of every other answer. */
export function errorMessage(fault: StreamFault, requestId: string): ServerMessage {
  return { type: 'error', error: { type: fault.type, message: fault.message, request_id: requestId } };
}

// -- model service → gateway (internal protocol version 1, /internal/stream)

export type ReplicaMessage =
  | { type: 'ready'; latency_samples: number }
  | { type: 'done'; echo?: EchoReport }
  | { type: 'error'; message: string }
  | SpeechMessage;

export const replicaReady = (latencySamples: number): ReplicaMessage => ({ type: 'ready', latency_samples: latencySamples });
/** `done`, with the canceller's figures when the stream had an echo reference. */
export const replicaDone = (echo?: EchoReport | null): ReplicaMessage => (echo ? { type: 'done', echo } : { type: 'done' });

/** An echo report as a replica sent it, or undefined when it is not one. */
function echoReportOf(v: unknown): EchoReport | undefined {
  if (v === null || typeof v !== 'object') return undefined;
  const r = v as { delayMs?: unknown; erleDb?: unknown; referenceActive?: unknown };
  const num = (x: unknown): x is number | null => x === null || (typeof x === 'number' && Number.isFinite(x));
  if (!num(r.delayMs) || !num(r.erleDb) || typeof r.referenceActive !== 'boolean') return undefined;
  return { delayMs: r.delayMs, erleDb: r.erleDb, referenceActive: r.referenceActive };
}
export const replicaError = (message: string): ReplicaMessage => ({ type: 'error', message });

/** A replica's text message, or null for anything else (ignored: whatever a replica sends, nothing here throws). */
export function parseReplicaText(text: string): ReplicaMessage | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return null;
  }
  if (parsed === null || typeof parsed !== 'object') return null;
  const msg = parsed as { type?: unknown; latency_samples?: unknown; message?: unknown; at_ms?: unknown; decided_ms?: unknown; echo?: unknown };
  if (msg.type === 'ready' && typeof msg.latency_samples === 'number') return { type: 'ready', latency_samples: msg.latency_samples };
  if (msg.type === 'done') return replicaDone(echoReportOf(msg.echo));
  if (msg.type === 'error' && typeof msg.message === 'string') return { type: 'error', message: msg.message };
  if ((msg.type === 'speech_start' || msg.type === 'speech_end') && ms(msg.at_ms) && ms(msg.decided_ms)) {
    return { type: msg.type, at_ms: msg.at_ms, decided_ms: msg.decided_ms };
  }
  return null;
}

function ms(x: unknown): x is number {
  return typeof x === 'number' && Number.isFinite(x) && x >= 0;
}
