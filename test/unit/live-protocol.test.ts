// The live streams' protocol module (src/live-protocol), which both ends import: the query read the same way by the
// gateway and the model service (and the relay's query read back to the same settings), the text messages both ways,
// and the phase table (allowed moves pass, every other move throws).
import { CLOSE, StreamFault } from '../../src/live-protocol/close';
import { doneMessage, echoStats, errorMessage, parseClientText, parseReplicaText, readyMessage, replicaDone, replicaError, replicaReady } from '../../src/live-protocol/messages';
import { LivePhases, type LivePhase } from '../../src/live-protocol/phases';
import { inputFrameBytes, liveQuery, LiveQueryError, outputFrameBytes, parseLiveQuery, type LiveParams } from '../../src/live-protocol/query';

const q = (s: string): Record<string, unknown> => {
  const out: Record<string, unknown> = {};
  for (const [k, v] of new URLSearchParams(s)) out[k] = out[k] === undefined ? v : [out[k], v].flat();
  return out;
};

describe('query', () => {
  test('defaults, and every setting read back from the query the relay builds', () => {
    expect(parseLiveQuery({}, 12)).toEqual({ model: 'nsm-2', sampleRate: 16000, encoding: 'pcm_s16le', channels: 1, attenuationLimitDb: 12 });
    const settings: LiveParams[] = [
      { model: 'nsm-4', sampleRate: 8000, encoding: 'mulaw', channels: 2, attenuationLimitDb: 0 },
      { model: 'nsm-2-hd', sampleRate: 48000, encoding: 'pcm_f32le', channels: 1, attenuationLimitDb: 37.5 },
      { model: 'nsm-1', sampleRate: 11025, encoding: 'alaw', channels: 1, attenuationLimitDb: 100 },
      { model: 'nsm-2', sampleRate: 16000, encoding: 'pcm_s16le', channels: 3, attenuationLimitDb: 6, echoReference: true },
    ];
    for (const p of settings) expect(parseLiveQuery(q(liveQuery(p).toString()), 99)).toEqual(p);
    // A ticket is part of the public query (browsers), and never in the relayed one.
    expect(parseLiveQuery(q('ticket=tk_x&model=nsm-3'), 0).model).toBe('nsm-3');
    expect(liveQuery(settings[0]).has('ticket')).toBe(false);
  });

  test.each([
    ['sample_rate=7999', '"sample_rate" must be an integer from 8000 to 48000 (got "7999")'],
    ['sample_rate=16000.5', '"sample_rate" must be an integer from 8000 to 48000'],
    ['channels=3', '"channels" must be an integer from 1 to 2'],
    ['encoding=ulaw', 'pcm_s16le, pcm_f32le, mulaw, alaw (got "ulaw")'],
    ['model=nsm-9', '"model" must be one of nsm-1, nsm-2, nsm-3, nsm-4, nsm-2-hd'],
    ['attenuation_limit_db=', '"attenuation_limit_db" must be a number from 0 to 100'],
    ['attenuation_limit_db=101', '"attenuation_limit_db" must be a number from 0 to 100'],
    ['model=nsm-1&model=nsm-2', '"model" was given more than once'],
    ['rate=16000', 'unknown query parameter "rate"; accepted: model, sample_rate'],
  ])('%s is refused: %s', (query, message) => {
    expect(() => parseLiveQuery(q(query), 0)).toThrow(LiveQueryError);
    expect(() => parseLiveQuery(q(query), 0)).toThrow(message);
  });

  test('vad=true and its settings: defaults filled in, read back from the relayed query, echoed by ready', () => {
    expect(parseLiveQuery(q('vad=true'), 0).vad).toEqual({ threshold: 0.7, minSpeechMs: 250, hangoverMs: 300 });
    expect(parseLiveQuery(q('vad=0'), 0)).not.toHaveProperty('vad');
    const p = parseLiveQuery(q('vad=1&vad_threshold=0.55&vad_min_speech_ms=0&vad_hangover_ms=800'), 0);
    expect(p.vad).toEqual({ threshold: 0.55, minSpeechMs: 0, hangoverMs: 800 });
    expect(parseLiveQuery(q(liveQuery(p).toString()), 0)).toEqual(p);
    expect(readyMessage('r', p, 512)).toMatchObject({ vad: true, vad_threshold: 0.55, vad_min_speech_ms: 0, vad_hangover_ms: 800 });
    expect(parseReplicaText('{"type":"speech_end","at_ms":3200,"decided_ms":3520}')).toEqual({ type: 'speech_end', at_ms: 3200, decided_ms: 3520 });
    expect(parseReplicaText('{"type":"speech_start","at_ms":-1,"decided_ms":3}')).toBeNull();
  });

  test('frame sizes', () => {
    expect(inputFrameBytes({ encoding: 'pcm_s16le', channels: 2 })).toBe(4);
    expect(inputFrameBytes({ encoding: 'pcm_f32le', channels: 1 })).toBe(4);
    expect(outputFrameBytes({ encoding: 'mulaw', channels: 2 })).toBe(2);
    // An echo reference is one more input channel, not output.
    expect(inputFrameBytes({ encoding: 'pcm_s16le', channels: 2 })).toBe(4);
    expect(outputFrameBytes({ encoding: 'pcm_s16le', channels: 2, echoReference: true })).toBe(2);
    expect(parseLiveQuery(q('channels=2&echo_reference=last'), 0)).toMatchObject({ channels: 2, echoReference: true });
    expect(() => parseLiveQuery(q('channels=2&echo_reference=first'), 0)).toThrow('"echo_reference" must be last');
    expect(() => parseLiveQuery(q('echo_reference=last'), 0)).toThrow('"echo_reference" needs "channels" of at least 2');
  });
});

describe('messages', () => {
  test('a client text: end, or the reason it is refused (never a throw)', () => {
    expect(parseClientText('{"type":"end"}')).toEqual({ message: { type: 'end' } });
    expect(parseClientText(' {"type":"end","x":1} ')).toEqual({ message: { type: 'end' } });
    expect(parseClientText('end')).toEqual({ refused: 'a text message must be JSON: {"type":"end"}' });
    expect(parseClientText('{"type":"stop"}')).toEqual({ refused: 'unknown text message (type "stop"); send binary PCM or {"type":"end"}' });
    for (const [text, what] of [['null', 'null'], ['[1]', 'array'], ['3', 'number'], ['{"type":null}', 'object']]) {
      expect(parseClientText(text)).toEqual({ refused: `unknown text message (a JSON ${what}); send binary PCM or {"type":"end"}` });
    }
  });

  test('the public messages, their fields in the documented order', () => {
    const ready = readyMessage('req_1', { model: 'nsm-2', sampleRate: 8000, encoding: 'mulaw', channels: 1, attenuationLimitDb: 0 }, 281);
    expect(JSON.stringify(ready)).toBe(
      '{"type":"ready","request_id":"req_1","model":"nsm-2","sample_rate":8000,"encoding":"mulaw","channels":1,"latency_ms":35.13,"latency_samples":281}',
    );
    const echoReady = readyMessage('req_1', { model: 'nsm-2', sampleRate: 16000, encoding: 'pcm_s16le', channels: 2, attenuationLimitDb: 0, echoReference: true }, 640);
    expect(echoReady).toMatchObject({ channels: 2, echo_reference: true, output_channels: 1 });
    expect(echoStats({ delayMs: 72.4, erleDb: 12.345, referenceActive: true })).toEqual({ echo_reference: true, echo_reference_active: true, echo_delay_ms: 72, echo_erle_db: 12.3 });
    expect(echoStats({ delayMs: null, erleDb: null, referenceActive: false })).toEqual({ echo_reference: true, echo_reference_active: false, echo_delay_ms: null, echo_erle_db: null });
    const stats = { model: 'nsm-2', sample_rate: 8000, input_seconds: 1, output_seconds: 1, credits_charged: 1, bytes_in: 8000, bytes_out: 8000 };
    expect(doneMessage(stats)).toEqual({ type: 'done', stats });
    expect(errorMessage(new StreamFault('quota_exhausted', 'out', CLOSE.creditsExhausted), 'req_2')).toEqual({
      type: 'error',
      error: { type: 'quota_exhausted', message: 'out', request_id: 'req_2' },
    });
  });

  test('a replica\'s messages round-trip; anything else is ignored', () => {
    const echo = { delayMs: 64, erleDb: null, referenceActive: true };
    for (const m of [replicaReady(512), replicaDone(), replicaDone(echo), replicaError('lost')]) expect(parseReplicaText(JSON.stringify(m))).toEqual(m);
    // Echo figures that are not figures are dropped, not trusted.
    expect(parseReplicaText('{"type":"done","echo":{"delayMs":"x","erleDb":1,"referenceActive":true}}')).toEqual({ type: 'done' });
    for (const text of ['', 'null', '7', '"ready"', '{"type":"ready"}', '{"type":"error","message":3}', '{"type":"speech"}']) {
      expect(parseReplicaText(text)).toBeNull();
    }
  });
});

describe('phases', () => {
  const ALL: LivePhase[] = ['opening', 'live', 'ending', 'flushing', 'done', 'failed'];
  const ALLOWED = new Set([
    'opening>live', 'opening>ending', 'opening>done', 'opening>failed',
    'live>ending', 'live>done', 'live>failed',
    'ending>flushing', 'ending>done', 'ending>failed',
    'flushing>done', 'flushing>failed',
  ]);
  /** A machine in `phase`, reached through allowed moves. */
  const at = (phase: LivePhase): LivePhases => {
    const p = new LivePhases();
    const path: Record<LivePhase, LivePhase[]> = {
      opening: [], live: ['live'], ending: ['ending'], flushing: ['ending', 'flushing'], done: ['done'], failed: ['failed'],
    };
    for (const step of path[phase]) p.to(step);
    return p;
  };

  test.each(ALL.flatMap((from) => ALL.map((to) => [from, to] as const)))('%s → %s', (from, to) => {
    const p = at(from);
    if (ALLOWED.has(`${from}>${to}`)) {
      p.to(to);
      expect(p.now).toBe(to);
    } else {
      expect(() => p.to(to)).toThrow(`a live stream cannot go from ${from} to ${to}`);
      expect(p.now).toBe(from);
    }
  });

  test('what each phase allows', () => {
    expect(ALL.filter((ph) => at(ph).takesAudio)).toEqual(['opening', 'live']);
    expect(ALL.filter((ph) => at(ph).closing)).toEqual(['ending', 'flushing']);
    expect(ALL.filter((ph) => at(ph).over)).toEqual(['done', 'failed']);
  });
});
