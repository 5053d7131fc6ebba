// A short generated echo scene at 16 kHz for warming a thread's JIT up before real echo streams arrive (the live
// workers run it through a throwaway canceller at start: docs/echo.md, Live streams). It takes every path of the
// canceller's hop once the reference is active: the delay estimate (a 40 ms bulk delay), the main and shadow filters,
// the loudspeaker model (the echo is clipped), the suppressor in far-end single talk and in double talk (a near-end
// talker from 40 % to 80 % of the scene), and a silent reference at the end. Not realistic audio: shaped,
// syllable-modulated noise, deterministic (a fixed seed).

export interface WarmScene {
  /** Microphone: the echo, the near-end talker, a little noise. */
  mic: Float32Array;
  /** What the loudspeaker played. */
  ref: Float32Array;
}

const RATE = 16000;

export function warmScene(seconds: number): WarmScene {
  const n = Math.round(seconds * RATE);
  let seed = 0x2545f491;
  const rand = (): number => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed / 4294967296 - 0.5;
  };
  // Speech-like: white noise through a resonance, gated by syllables of ~200 ms.
  const talker = (gain: number, syllableHz: number): Float32Array => {
    const x = new Float32Array(n);
    let y1 = 0;
    let y2 = 0;
    for (let i = 0; i < n; i++) {
      const y = rand() + 1.6 * y1 - 0.8 * y2;
      y2 = y1;
      y1 = y;
      const env = Math.max(0, Math.sin((2 * Math.PI * syllableHz * i) / RATE));
      x[i] = gain * env * y;
    }
    return x;
  };
  const ref = talker(0.08, 2.3);
  const end = Math.round(0.9 * n);
  ref.fill(0, end);
  // Echo path: 40 ms bulk delay, then 60 ms of exponentially decaying taps; the loudspeaker clips.
  const delay = Math.round(0.04 * RATE);
  const taps = Float32Array.from({ length: Math.round(0.06 * RATE) }, (_, k) => rand() * Math.exp(-k / 160) * 0.5);
  taps[0] = 0.6;
  const played = ref.map((v) => Math.tanh(4 * v) / 4);
  const near = talker(0.05, 1.7);
  const mic = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    let e = 0;
    const i0 = i - delay;
    for (let k = 0; k < taps.length && k <= i0; k += 1) e += taps[k] * played[i0 - k];
    const talks = i >= 0.4 * n && i < 0.8 * n;
    mic[i] = e + (talks ? near[i] : 0) + 1e-3 * rand();
  }
  return { mic, ref };
}
