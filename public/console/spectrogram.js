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

  // The rate a file was recorded at, read from its header: the browser decodes everything at the context's rate, so
  // without it a 16 kHz MP3 or Opus file is drawn up to 24 kHz with two thirds of the picture empty.
  const MP3_RATES = [[11025, 12000, 8000], null, [22050, 24000, 16000], [44100, 48000, 32000]]; // by version bits
  const MP3_KBPS = { 3: [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320], 2: [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160] };
  const plausible = (rate) => (Number.isFinite(rate) && rate >= 4000 && rate <= 768000 ? rate : null);

  /** Finds `ascii` in the bytes from `from` up to `limit`; -1 when absent. */
  function indexOf(b, ascii, from, limit) {
    const end = Math.min(b.length, limit) - ascii.length;
    outer: for (let i = from; i <= end; i++) {
      for (let k = 0; k < ascii.length; k++) if (b[i + k] !== ascii.charCodeAt(k)) continue outer;
      return i;
    }
    return -1;
  }

  /** An MPEG audio frame header at `o`: { rate, length } (length 0 when not layer III), or null. */
  function mp3Frame(b, o) {
    if (o + 4 > b.length || b[o] !== 0xff || (b[o + 1] & 0xe0) !== 0xe0) return null;
    const version = (b[o + 1] >> 3) & 3, layer = (b[o + 1] >> 1) & 3, bitrate = b[o + 2] >> 4, rateIndex = (b[o + 2] >> 2) & 3;
    if (version === 1 || layer === 0 || bitrate === 0 || bitrate === 15 || rateIndex === 3) return null;
    const rate = MP3_RATES[version][rateIndex];
    const kbps = layer === 1 ? MP3_KBPS[version === 3 ? 3 : 2][bitrate] : 0; // layer bits 01 = layer III
    const length = kbps ? Math.floor(((version === 3 ? 144 : 72) * kbps * 1000) / rate) + ((b[o + 2] >> 1) & 1) : 0;
    return { rate, length };
  }

  /**
   * The sample rate in the header of a WAV, FLAC, MP3, Ogg (Vorbis, Opus: its input rate, as the API reports it), MP4/M4A
   * or WebM file, or null when it cannot be told (the caller then decodes at 48 kHz).
   */
  function sourceSampleRate(arrayBuffer) {
    const wav = wavSampleRate(arrayBuffer);
    if (wav) return plausible(wav);
    const b = new Uint8Array(arrayBuffer);
    const head = 65536;
    const u32le = (o) => b[o] | (b[o + 1] << 8) | (b[o + 2] << 16) | (b[o + 3] * 16777216);
    if (indexOf(b, 'fLaC', 0, 4) === 0 && b.length >= 21) return plausible((b[18] << 12) | (b[19] << 4) | (b[20] >> 4));
    const opus = indexOf(b, 'OpusHead', 0, head); // Ogg Opus, or Opus in WebM (its CodecPrivate)
    if (opus >= 0 && opus + 16 <= b.length) return plausible(u32le(opus + 12) || 48000);
    const vorbis = indexOf(b, '\x01vorbis', 0, head);
    if (vorbis >= 0 && vorbis + 16 <= b.length) return plausible(u32le(vorbis + 12));
    if (indexOf(b, 'ftyp', 4, 8) === 4) {
      const entry = indexOf(b, 'mp4a', 0, b.length); // the sample entry may follow the media data (moov at the end)
      if (entry >= 0 && entry + 30 <= b.length) return plausible((b[entry + 28] << 8) | b[entry + 29]);
      return null;
    }
    if (b[0] === 0x1a && b[1] === 0x45 && b[2] === 0xdf && b[3] === 0xa3) {
      // Matroska/WebM: SamplingFrequency (0xB5), a 4- or 8-byte float.
      const v = new DataView(arrayBuffer);
      for (let i = 0; i + 10 <= Math.min(b.length, head); i++) {
        if (b[i] !== 0xb5 || (b[i + 1] !== 0x84 && b[i + 1] !== 0x88)) continue;
        const rate = b[i + 1] === 0x84 ? v.getFloat32(i + 2) : v.getFloat64(i + 2);
        if (plausible(rate) && Number.isInteger(rate)) return rate;
      }
      return null;
    }
    // MP3: after an ID3v2 tag, the first frame header whose successor (layer III) is where its length says.
    let o = 0;
    if (indexOf(b, 'ID3', 0, 3) === 0 && b.length >= 10) o = 10 + ((b[6] << 21) | (b[7] << 14) | (b[8] << 7) | b[9]) + (b[5] & 0x10 ? 10 : 0);
    for (const end = Math.min(b.length, o + head); o < end; o++) {
      const frame = mp3Frame(b, o);
      if (!frame) continue;
      const next = frame.length ? mp3Frame(b, o + frame.length) : frame;
      if (next && next.rate === frame.rate) return frame.rate;
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

  window.Spectrogram = { wavSampleRate, sourceSampleRate, decodeMono, stft, fft, draw };
})();
