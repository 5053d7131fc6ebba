// Live-stream metrics on GET /metrics (issue 28): ns_streams_active while a stream is open, ns_stream_frames_total
// in/out counting the binary messages, the added-latency histogram (one observation per input message that completes
// output), and underruns: a 30 s first message through nsm-4 cannot come back within UNDERRUN_MS. The reference
// moments (arrival, or the real-time moment for a client sending ahead) are checked exactly with an injected clock.
import fs from 'node:fs';
import type http from 'node:http';
import { createApp, type AppHandle } from '../../src/app';
import type { Config } from '../../src/config';
import { createRegistry, metricsHandler } from '../../src/metrics';
import { createStreamMetrics, UNDERRUN_MS } from '../../src/streaming/metrics';
import { closeQuietly, createToken, eventually, fixture, listen, rawRequest, testConfig } from '../helpers/service-helpers';
import { serveApp, StreamClient, wavData } from '../helpers/streaming-helpers';

/** The value of one sample line of a Prometheus text exposition (0 when absent). */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(name + '{') && !line.startsWith(name + ' ')) continue;
    const labelText = line.slice(name.length).split(' ')[0];
    if (wanted.every((w) => labelText.includes(w))) return Number(line.split(' ').pop());
  }
  return 0;
}

describe('live-stream metrics through GET /metrics', () => {
  let config: Config;
  let handle: AppHandle;
  let server: http.Server;
  let base: string;
  let wsUrl: string;
  let auth: Record<string, string>;
  const input = wavData(fs.readFileSync(fixture('speech-noisy-16k-mono.wav')));
  const scrape = async (): Promise<string> => (await rawRequest(`${base}/metrics`, {})).body.toString();

  beforeAll(async () => {
    config = testConfig();
    handle = await createApp(config);
    const served = await serveApp(handle);
    server = served.server;
    base = served.http;
    wsUrl = served.ws;
    auth = { Authorization: `Bearer ${await createToken(handle.store)}` };
  });

  afterAll(async () => {
    await closeQuietly(server);
    await handle.close();
    fs.rmSync(config.dataDir, { recursive: true, force: true });
  });

  test('active streams, frames in and out, one latency observation per input message that completes output', async () => {
    const before = await scrape();
    expect(sample(before, 'ns_streams_active')).toBe(0);
    const stream = new StreamClient(`${wsUrl}?model=nsm-2`, auth);
    await stream.ready;
    expect(sample(await scrape(), 'ns_streams_active')).toBe(1);
    stream.send(input, 640); // 150 messages of 320 samples
    stream.end();
    expect((await stream.closed).code).toBe(1000);
    await eventually(async () => sample(await scrape(), 'ns_streams_active') === 0);
    const after = await scrape();
    expect(sample(after, 'ns_stream_frames_total', { direction: 'in' }) - sample(before, 'ns_stream_frames_total', { direction: 'in' })).toBe(150);
    expect(sample(after, 'ns_stream_frames_total', { direction: 'out' }) - sample(before, 'ns_stream_frames_total', { direction: 'out' })).toBe(stream.messages);
    // The first message (320 samples) is inside the model's 512-sample delay: it completes no output of its own.
    const count = (t: string) => sample(t, 'ns_stream_added_latency_seconds_count', { model: 'nsm-2' });
    expect(count(after) - count(before)).toBe(149);
  }, 30_000);

  test('a 30 s first message through nsm-4 is an underrun: its output cannot go out within UNDERRUN_MS', async () => {
    const before = await scrape();
    const stream = new StreamClient(`${wsUrl}?model=nsm-4`, auth);
    await stream.ready;
    const pcm = Buffer.alloc(30 * 16000 * 2);
    for (let i = 0; i < pcm.length; i += 2) pcm.writeInt16LE(((i * 7919) % 4000) - 2000, i);
    stream.send(pcm, pcm.length);
    stream.end();
    expect((await stream.closed).code).toBe(1000);
    const after = await scrape();
    const diff = (name: string, labels: Record<string, string>) => sample(after, name, labels) - sample(before, name, labels);
    expect(diff('ns_stream_underruns_total', { model: 'nsm-4' })).toBe(1);
    expect(diff('ns_stream_added_latency_seconds_count', { model: 'nsm-4' })).toBe(1);
    expect(diff('ns_stream_added_latency_seconds_bucket', { model: 'nsm-4', le: String(UNDERRUN_MS / 1000) })).toBe(0);
  }, 60_000);

  test('reference moments: arrival for a real-time client, the real-time moment for one sending ahead', async () => {
    const registry = createRegistry({ service: 'gateway' });
    let now = 0;
    const metrics = createStreamMetrics(registry, { active: () => 3 }, () => now);
    const meter = metrics.meter('nsm-2', 16000, 512);
    meter.input(320); // t=0: inside the delay, completes nothing
    now = 20;
    meter.input(320); // completes output up to 128, reference 20 ms
    now = 25;
    meter.output(256); // 5 ms
    now = 30;
    meter.input(16000); // 1 s at once, ahead of real time: its real-time moment is 20 + 1000 ms
    now = 500;
    meter.output(16128); // before that moment: 0 ms, not late
    now = 2000;
    meter.input(320); // after a stall: reference = arrival
    now = 2100;
    meter.output(16448); // 100 ms: an underrun
    const { server: metricsServer, url } = await listen(metricsHandler(registry, null));
    try {
      const text = (await rawRequest(`${url}/metrics`, {})).body.toString();
      expect(sample(text, 'ns_streams_active')).toBe(3);
      expect(sample(text, 'ns_stream_frames_total', { direction: 'in' })).toBe(4);
      expect(sample(text, 'ns_stream_frames_total', { direction: 'out' })).toBe(3);
      expect(sample(text, 'ns_stream_added_latency_seconds_count', { model: 'nsm-2' })).toBe(3);
      expect(sample(text, 'ns_stream_added_latency_seconds_sum', { model: 'nsm-2' })).toBeCloseTo(0.105, 6);
      expect(sample(text, 'ns_stream_added_latency_seconds_bucket', { model: 'nsm-2', le: '0.005' })).toBe(2);
      expect(sample(text, 'ns_stream_underruns_total', { model: 'nsm-2' })).toBe(1);
    } finally {
      await closeQuietly(metricsServer);
    }
  });
});
