// Live-stream metrics (prom-client, on the gateway's GET /metrics): ns_streams_active, ns_stream_frames_total (binary
// WebSocket messages in from clients and out to them), and what the server adds to a stream's latency: for each input
// message, the time from its reference moment to the sending of the output it completes (output sample n needs input
// up to n + the model's delay), as ns_stream_added_latency_seconds; above UNDERRUN_MS it is also an underrun.
// The reference moment is the message's arrival, or, for a client sending ahead of real time (a file), the moment a
// real-time client would have sent it (first arrival + audio since): a client with audio buffered is not late.
import client, { type Registry } from 'prom-client';

/** Added latency above which an output frame counts as an underrun: as the bench's (a 3-frame jitter buffer of 20 ms). */
export const UNDERRUN_MS = 60;

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.05, 0.06, 0.1, 0.25, 0.5, 1, 2.5];

/** One stream's meter: the session reports its input and output in samples (per channel). */
export interface StreamMeter {
  /** A binary message with `samples` samples arrived. */
  input(samples: number): void;
  /** A binary message went out; `samples` of output have now been sent in all. */
  output(samples: number): void;
}

export interface StreamMetrics {
  /** A meter for a stream of `model` at `sampleRate` whose output sample n needs input up to n + `latencySamples`. */
  meter(model: string, sampleRate: number, latencySamples: number): StreamMeter;
}

export function createStreamMetrics(registry: Registry, sources: { active: () => number }, now: () => number = () => performance.now()): StreamMetrics {
  new client.Gauge({
    name: 'ns_streams_active',
    help: 'Live streams open on this gateway now.',
    registers: [registry],
    collect() {
      this.set(sources.active());
    },
  });
  // Counted in plain numbers and handed to prom-client at scrape time: a labelled inc() per message cost the main
  // thread ~2 % of its time at 300 streams (profile).
  const count = { in: 0, out: 0 };
  new client.Counter({
    name: 'ns_stream_frames_total',
    help: 'Binary WebSocket messages of live streams: "in" from clients, "out" (denoised) to them.',
    labelNames: ['direction'] as const,
    registers: [registry],
    collect() {
      this.reset();
      this.inc({ direction: 'in' }, count.in);
      this.inc({ direction: 'out' }, count.out);
    },
  });
  const latency = new client.Histogram({
    name: 'ns_stream_added_latency_seconds',
    help: 'Per input message: from its arrival (or its real-time moment, for clients sending ahead) to the sending of the output it completes (seconds).',
    labelNames: ['model'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const underruns = new client.Counter({
    name: 'ns_stream_underruns_total',
    help: `Input messages whose output went out more than ${UNDERRUN_MS} ms after their arrival (or real-time moment).`,
    labelNames: ['model'] as const,
    registers: [registry],
  });

  return {
    meter(model, sampleRate, latencySamples) {
      const observe = latency.labels({ model });
      const late = underruns.labels({ model });
      late.inc(0);
      // Pending input messages: the output count that completes each, and its reference moment (ms).
      const targets: number[] = [];
      const refs: number[] = [];
      let head = 0;
      let received = 0;
      let sent = 0;
      let firstAt = -1;
      let firstEnd = 0;
      return {
        input(samples) {
          count.in++;
          const t = now();
          received += samples;
          if (firstAt < 0) {
            firstAt = t;
            firstEnd = received;
          }
          const target = received - latencySamples;
          if (target <= sent) return; // completes no output of its own
          targets.push(target);
          refs.push(Math.max(t, firstAt + ((received - firstEnd) * 1000) / sampleRate));
        },
        output(total) {
          count.out++;
          sent = total;
          if (head === targets.length || targets[head] > total) return;
          const t = now();
          while (head < targets.length && targets[head] <= total) {
            const ms = Math.max(0, t - refs[head]);
            observe.observe(ms / 1000);
            if (ms > UNDERRUN_MS) late.inc();
            head++;
          }
          if (head > 1024 && head * 2 > targets.length) {
            targets.splice(0, head);
            refs.splice(0, head);
            head = 0;
          }
        },
      };
    },
  };
}
