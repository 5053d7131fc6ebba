// The canceller with its band limited (options.ts `bins`) on a narrow-band scene (the bench's scene decimated to 8 kHz
// and interpolated back, as the narrow-band chain feeds it): it still cancels, and its output above the band is 0.
import { erle } from '../../scripts/bench/echo-metrics';
import { makeScene } from '../../scripts/bench/echo-scenes';
import { narrowScene } from '../../scripts/bench/echo-narrow';
import { Interpolator2 } from '../../src/dsp/halfband';
import { RealFFT } from '../../src/dsp/fft';
import { FS, runCanceller, talkers } from '../helpers/dsp-aec-helpers';

jest.setTimeout(60000);

test.each(['wasm', 'js'] as const)('72 bins on a narrow-band scene (%s): ERLE after 6 s, nothing above 4.5 kHz', async (backend) => {
  const s8 = narrowScene(makeScene({ kind: 'st', seed: 11, seconds: 10, rt60: 0.35, delayMs: 120, speaker: 'linear' }, await talkers()));
  const up = (x: Float32Array): Float32Array => new Interpolator2().process(x);
  const scene = { ...s8, mic: up(s8.mic), ref: up(s8.ref), echo: up(s8.echo), near: up(s8.near) };
  const out = runCanceller([scene.mic], scene.ref, { bins: 72, backend }).out[0];
  expect(erle(scene, out, 6 * FS, 10 * FS)).toBeGreaterThan(30);
  // Bins 76 and up (from 4.75 kHz) of the output's Hann-windowed 256-point frames: what is left there is the synthesis
  // window's spread of the band's edge, far under the band.
  const fft = new RealFFT(256);
  const hann = Float64Array.from({ length: 256 }, (_, i) => 0.5 - 0.5 * Math.cos((2 * Math.PI * i) / 256));
  const re = new Float64Array(129);
  const im = new Float64Array(129);
  const bands = (x: Float32Array): { high: number; all: number } => {
    let high = 0;
    let all = 0;
    for (let at = FS; at + 256 <= x.length; at += 128) {
      fft.forward(Float64Array.from(x.subarray(at, at + 256), (v, i) => v * hann[i]), 0, re, im);
      for (let k = 0; k < 129; k++) {
        const p = re[k] * re[k] + im[k] * im[k];
        all += p;
        if (k >= 76) high += p;
      }
    }
    return { high, all };
  };
  const { high, all } = bands(out);
  expect(all).toBeGreaterThan(0);
  // Measured 1.12e-6 of the output (5.45e-7 before the residual slope made the output 1.8 dB quieter), and 4.5e-11 of
  // the microphone's energy (3.3e-11 before): over 100 dB under what came in.
  expect(high / all).toBeLessThan(3e-6);
  expect(high / bands(scene.mic).all).toBeLessThan(1e-9);
});
