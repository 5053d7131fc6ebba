// Spectrograms in the browser: decode with an OfflineAudioContext, STFT with a radix-2 FFT
// and a Hann window, paint magnitude in dB to a canvas. No libraries.
'use strict';
(function () {
  /** Sample rate from a RIFF/WAVE header, or null when the bytes are not a WAV file. */
  function wavSampleRate(arrayBuffer) {
    if (arrayBuffer.byteLength < 44) return null;
    const v = new DataView(arrayBuffer);
    const tag = (o) => String.fromCharCode(v.getUint8(o), v.getUint8(o + 1), v.getUint8(o + 2), v.getUint8(o + 3));
    if (tag(0) !== 'RIFF' || tag(8) !== 'WAVE') return null;
    // Walk the chunks to "fmt " (it is usually, but not always, the first).
    let off = 12;
    while (off + 8 <= arrayBuffer.byteLength) {
      const id = tag(off);
      const size = v.getUint32(off + 4, true);
      if (id === 'fmt ' && off + 16 <= arrayBuffer.byteLength) return v.getUint32(off + 12, true);
      off += 8 + size + (size & 1);
    }
    return null;
  }

  /** Decodes any format the browser knows, resampled to `sampleRate`, downmixed to mono. */
  async function decodeMono(arrayBuffer, sampleRate) {
    const rate = Math.min(96000, Math.max(8000, sampleRate || 48000));
    const ctx = new OfflineAudioContext(1, 1, rate);
    // decodeAudioData detaches its argument: give it a copy so the caller keeps the bytes.
    const audio = await ctx.decodeAudioData(arrayBuffer.slice(0));
    const mono = new Float32Array(audio.length);
    for (let c = 0; c < audio.numberOfChannels; c++) {
      const ch = audio.getChannelData(c);
      for (let i = 0; i < ch.length; i++) mono[i] += ch[i] / audio.numberOfChannels;
    }
    return { samples: mono, sampleRate: audio.sampleRate, duration: audio.duration };
  }

  /** In-place iterative radix-2 FFT of (re, im), length a power of two. */
  function fft(re, im) {
    const n = re.length;
    for (let i = 1, j = 0; i < n; i++) {
      let bit = n >> 1;
      for (; j & bit; bit >>= 1) j ^= bit;
      j ^= bit;
      if (i < j) {
        let t = re[i]; re[i] = re[j]; re[j] = t;
        t = im[i]; im[i] = im[j]; im[j] = t;
      }
    }
    for (let len = 2; len <= n; len <<= 1) {
      const ang = (-2 * Math.PI) / len;
      const wRe = Math.cos(ang), wIm = Math.sin(ang);
      for (let i = 0; i < n; i += len) {
        let curRe = 1, curIm = 0;
        const half = len >> 1;
        for (let k = 0; k < half; k++) {
          const aRe = re[i + k], aIm = im[i + k];
          const bRe = re[i + k + half] * curRe - im[i + k + half] * curIm;
          const bIm = re[i + k + half] * curIm + im[i + k + half] * curRe;
          re[i + k] = aRe + bRe; im[i + k] = aIm + bIm;
          re[i + k + half] = aRe - bRe; im[i + k + half] = aIm - bIm;
          const nRe = curRe * wRe - curIm * wIm;
          curIm = curRe * wIm + curIm * wRe;
          curRe = nRe;
        }
      }
    }
  }

  /**
   * Magnitude spectrogram in dB: `frames` columns of `bins` values (bins = fftSize/2).
   * The hop grows with the signal so the column count stays near `maxFrames`.
   */
  function stft(samples, fftSize, maxFrames) {
    const bins = fftSize / 2;
    const hop = Math.max(fftSize / 4, Math.ceil((samples.length - fftSize) / Math.max(1, maxFrames - 1)));
    const frames = Math.max(1, Math.floor(Math.max(0, samples.length - fftSize) / hop) + 1);
    const window = new Float64Array(fftSize);
    for (let i = 0; i < fftSize; i++) window[i] = 0.5 - 0.5 * Math.cos((2 * Math.PI * i) / fftSize);
    const db = new Float32Array(frames * bins);
    const re = new Float64Array(fftSize), im = new Float64Array(fftSize);
    for (let f = 0; f < frames; f++) {
      const start = f * hop;
      for (let i = 0; i < fftSize; i++) {
        const s = start + i < samples.length ? samples[start + i] : 0;
        re[i] = s * window[i];
        im[i] = 0;
      }
      fft(re, im);
      for (let b = 0; b < bins; b++) {
        const power = re[b] * re[b] + im[b] * im[b];
        db[f * bins + b] = 10 * Math.log10(power + 1e-12);
      }
    }
    return { db, frames, bins, hop };
  }

  // Dark-to-bright colour ramp (close to "inferno").
  const STOPS = [
    [0.0, [0, 0, 4]], [0.25, [66, 10, 104]], [0.5, [147, 38, 103]],
    [0.75, [221, 81, 58]], [0.9, [252, 165, 10]], [1.0, [252, 255, 164]],
  ];
  function colour(t) {
    t = Math.min(1, Math.max(0, t));
    for (let i = 1; i < STOPS.length; i++) {
      if (t <= STOPS[i][0]) {
        const [t0, c0] = STOPS[i - 1], [t1, c1] = STOPS[i];
        const u = (t - t0) / (t1 - t0);
        return [c0[0] + u * (c1[0] - c0[0]), c0[1] + u * (c1[1] - c0[1]), c0[2] + u * (c1[2] - c0[2])];
      }
    }
    return STOPS[STOPS.length - 1][1];
  }

  /**
   * Paints the spectrogram of `decoded` ({samples, sampleRate}) to `canvas`, with a frequency
   * axis in kHz and a time axis in seconds. `refDb` (optional) pins the colour scale's top so two
   * spectrograms share one scale; `axisHz` (optional, ≥ the signal's Nyquist frequency) sets the top of the
   * frequency axis so two spectrograms of different sample rates share one axis (above its own Nyquist
   * frequency a signal has nothing: that band stays empty). Returns the peak dB found.
   */
  function draw(canvas, decoded, refDb, axisHz) {
    const { samples, sampleRate } = decoded;
    const fftSize = sampleRate > 24000 ? 1024 : 512;
    const left = 42, bottom = 22, top = 6, right = 8;
    const plotW = canvas.width - left - right, plotH = canvas.height - top - bottom;
    const { db, frames, bins } = stft(samples, fftSize, plotW);
    let peak = -Infinity;
    for (let i = 0; i < db.length; i++) if (db[i] > peak) peak = db[i];
    const topDb = refDb !== undefined && refDb !== null ? refDb : peak;
    const rangeDb = 90;

    const img = new ImageData(frames, bins);
    for (let f = 0; f < frames; f++) {
      for (let b = 0; b < bins; b++) {
        const [r, g, bl] = colour((db[f * bins + b] - (topDb - rangeDb)) / rangeDb);
        const o = ((bins - 1 - b) * frames + f) * 4; // low frequencies at the bottom
        img.data[o] = r; img.data[o + 1] = g; img.data[o + 2] = bl; img.data[o + 3] = 255;
      }
    }
    const off = document.createElement('canvas');
    off.width = frames; off.height = bins;
    off.getContext('2d').putImageData(img, 0, 0);

    const nyquistHz = sampleRate / 2;
    const topHz = Math.max(nyquistHz, axisHz || 0);
    const signalH = plotH * (nyquistHz / topHz);
    const g = canvas.getContext('2d');
    g.fillStyle = '#0b0f1c';
    g.fillRect(0, 0, canvas.width, canvas.height);
    if (signalH < plotH) {
      // Above this signal's Nyquist frequency: no content at this sample rate.
      g.fillStyle = '#161c2b';
      g.fillRect(left, top, plotW, plotH - signalH);
    }
    g.imageSmoothingEnabled = true;
    g.drawImage(off, left, top + plotH - signalH, plotW, signalH);

    g.fillStyle = '#aab3c5';
    g.font = '10px system-ui, sans-serif';
    g.textBaseline = 'middle';
    const topK = topHz / 1000;
    const stepK = topK > 12 ? 4 : 2;
    for (let k = 0; k <= topK + 1e-9; k += stepK) {
      const y = top + plotH - (k / topK) * plotH;
      g.fillText(k === 0 ? '0' : `${k} kHz`, 4, Math.min(top + plotH - 4, Math.max(top + 5, y)));
    }
    const duration = samples.length / sampleRate;
    g.textBaseline = 'alphabetic';
    const stepS = duration > 60 ? 10 : duration > 20 ? 5 : duration > 6 ? 2 : duration > 2 ? 0.5 : 0.25;
    for (let s = 0; s <= duration + 1e-9; s += stepS) {
      const x = left + (s / Math.max(duration, 1e-9)) * plotW;
      g.fillText(`${+s.toFixed(2)}s`, Math.min(canvas.width - 24, x), canvas.height - 6);
    }
    canvas.dataset.ready = 'true';
    canvas.dataset.frames = String(frames);
    canvas.dataset.axisHz = String(topHz);
    canvas.dataset.sampleRate = String(sampleRate);
    return peak;
  }

  window.Spectrogram = { wavSampleRate, decodeMono, stft, fft, draw };
})();
