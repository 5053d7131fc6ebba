// The server-added latency of a live stream as its client measures it (`nsm stream --realtime` and
// `npm run bench -- --stream` use this one definition). For every output sample n: the time from sending the frame
// that holds input sample n + D (D = latency_samples, the delay the server declared in `ready`) to receiving sample
// n, or 0 when that frame was not sent yet. The audio's own duration and the client's pacing are not in it: a server
// that answered every frame at once adds ~0. Weighted by samples, so a message's share is its length.
//
// Why per sample: D covers the worst position of a sample within the model's hop, so the last sample of every answer
// counts from a frame not sent yet; timing only that sample (what nsm stream did) gave 0 ms every time.

/** Latency histogram in bins of `binMs` (the bench's 0.25 ms by default) up to `maxMs`, weighted by samples. */
export class LatencyHistogram {
  private readonly bins: Float64Array;
  private total = 0;
  max = 0;

  constructor(private readonly binMs = 0.25, maxMs = 2000) {
    this.bins = new Float64Array(Math.ceil(maxMs / binMs));
  }

  add(ms: number, weight: number): void {
    const b = Math.min(this.bins.length - 1, Math.max(0, Math.floor(ms / this.binMs)));
    this.bins[b] += weight;
    this.total += weight;
    if (ms > this.max) this.max = ms;
  }

  /** Samples counted. */
  get samples(): number {
    return this.total;
  }

  /** The upper edge of the bin holding the p-th percentile, ms (NaN when empty). */
  percentile(p: number): number {
    let acc = 0;
    const want = (p / 100) * this.total;
    for (let i = 0; i < this.bins.length; i++) {
      acc += this.bins[i];
      if (acc >= want && acc > 0) return (i + 1) * this.binMs;
    }
    return NaN;
  }
}

/**
 * Output samples [from, from + count) of a stream, received at `now`: calls `each(ms, samples)` for every run of them
 * that counts from the same sent frame. `sendTimes[k]` is when frame k (input samples [k * frameSamples, ...)) was
 * sent, undefined while it was not.
 */
export function addedLatency(
  sendTimes: ArrayLike<number | undefined>,
  frameSamples: number,
  delay: number,
  from: number,
  count: number,
  now: number,
  each: (ms: number, samples: number) => void,
): void {
  let s = from;
  const stop = from + count;
  while (s < stop) {
    const k = Math.floor((s + delay) / frameSamples);
    const end = Math.min(stop, (k + 1) * frameSamples - delay);
    const sentAt = k < sendTimes.length ? sendTimes[k] : undefined;
    each(sentAt === undefined ? 0 : Math.max(0, now - sentAt), end - s);
    s = end;
  }
}
