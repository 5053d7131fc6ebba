// AudioWorklet processors of the console's Live page (live.js): 'live-capture' cuts the microphone into frames of
// mono float samples for the WebSocket (with `reference`, frames of two interleaved channels: the microphone, then
// what the page plays, from its second input: the echo reference); 'live-playback' plays the denoised audio that comes back from a small jitter
// buffer, so network and server hiccups of a few tens of milliseconds do not click.
'use strict';

const QUIET = 0.0056; // -45 dBFS peak

class LiveCapture extends AudioWorkletProcessor {
  constructor(options) {
    super();
    this.size = options.processorOptions.frameSamples;
    this.channels = options.processorOptions.reference ? 2 : 1;
    this.frame = new Float32Array(this.size * this.channels);
    this.filled = 0;
    this.on = true;
    this.port.onmessage = (e) => {
      if (e.data === 'stop') this.on = false;
    };
  }

  process(inputs) {
    if (!this.on) return false;
    const ch = inputs[0] && inputs[0][0];
    if (!ch) return true; // the source has no audio yet (or its track ended)
    // The reference: what the page sends to the speakers in this same render quantum (nothing connected: silence).
    const ref = this.channels === 2 && inputs[1] && inputs[1][0];
    let i = 0;
    while (i < ch.length) {
      const n = Math.min(ch.length - i, this.size - this.filled);
      if (this.channels === 1) this.frame.set(ch.subarray(i, i + n), this.filled);
      else {
        for (let k = 0; k < n; k++) {
          this.frame[2 * (this.filled + k)] = ch[i + k];
          this.frame[2 * (this.filled + k) + 1] = ref ? ref[i + k] : 0;
        }
      }
      this.filled += n;
      i += n;
      if (this.filled === this.size) {
        // Transferred, not copied: the next frame gets a fresh buffer.
        this.port.postMessage(this.frame, [this.frame.buffer]);
        this.frame = new Float32Array(this.size * this.channels);
        this.filled = 0;
      }
    }
    return true;
  }
}

class LivePlayback extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const o = options.processorOptions;
    // Playing starts once this much is queued, and starts again at this level after the queue ran dry.
    this.prebuffer = o.prebufferSamples;
    // Beyond this the oldest audio is dropped, so a burst (or a clock drift) cannot grow the delay for good.
    this.maxBuffer = o.maxBufferSamples;
    this.queue = [];
    this.offset = 0; // read position in queue[0]
    this.buffered = 0;
    this.playing = false;
    this.underruns = 0;
    this.droppedSamples = 0;
    this.reportEvery = Math.round(sampleRate / 10);
    this.sinceReport = 0;
    // Each underrun leaves the queue a prebuffer fuller for good. Once a second the lowest level of that second above
    // the prebuffer is the delay no longer needed; it is cut from quiet audio only, where a skip cannot be heard.
    this.lowest = Infinity;
    this.sinceTrim = 0;
    this.trim = 0;
    this.trimmedSamples = 0;
    this.port.onmessage = (e) => {
      this.queue.push(e.data);
      this.buffered += e.data.length;
      while (this.buffered > this.maxBuffer && this.queue.length > 1) {
        const first = this.queue.shift();
        this.buffered -= first.length - this.offset;
        this.droppedSamples += first.length - this.offset;
        this.offset = 0;
      }
    };
  }

  process(_inputs, outputs) {
    const out = outputs[0][0];
    if (!this.playing && this.buffered >= this.prebuffer) this.playing = true;
    if (this.playing) {
      this.lowest = Math.min(this.lowest, this.buffered);
      while (this.trim > 0 && this.buffered - out.length > this.prebuffer && this.quietAhead(out.length)) this.skip(out.length);
      let i = 0;
      while (i < out.length && this.queue.length) {
        const head = this.queue[0];
        const n = Math.min(out.length - i, head.length - this.offset);
        out.set(head.subarray(this.offset, this.offset + n), i);
        i += n;
        this.offset += n;
        this.buffered -= n;
        if (this.offset === head.length) {
          this.queue.shift();
          this.offset = 0;
        }
      }
      if (i < out.length) {
        // Ran dry: the rest of this block stays silent; wait for the prebuffer again.
        this.playing = false;
        this.underruns++;
      }
    }
    this.sinceTrim += out.length;
    if (this.sinceTrim >= sampleRate) {
      this.trim = this.lowest === Infinity ? 0 : Math.max(0, this.lowest - this.prebuffer);
      this.lowest = Infinity;
      this.sinceTrim = 0;
    }
    this.sinceReport += out.length;
    if (this.sinceReport >= this.reportEvery) {
      this.sinceReport = 0;
      this.port.postMessage({
        bufferedSamples: this.buffered, underruns: this.underruns, droppedSamples: this.droppedSamples, trimmedSamples: this.trimmedSamples,
      });
    }
    return true;
  }

  /** Whether the next n queued samples all stay below QUIET (a pause in speech, where a skip is not heard). */
  quietAhead(n) {
    let seen = 0;
    for (let q = 0; q < this.queue.length && seen < n; q++) {
      const chunk = this.queue[q];
      for (let k = q === 0 ? this.offset : 0; k < chunk.length && seen < n; k++, seen++) {
        if (Math.abs(chunk[k]) > QUIET) return false;
      }
    }
    return seen === n;
  }

  /** Drops the next n queued samples. */
  skip(n) {
    this.trim -= n;
    this.trimmedSamples += n;
    this.buffered -= n;
    while (n > 0) {
      const head = this.queue[0];
      const k = Math.min(n, head.length - this.offset);
      this.offset += k;
      n -= k;
      if (this.offset === head.length) {
        this.queue.shift();
        this.offset = 0;
      }
    }
  }
}

registerProcessor('live-capture', LiveCapture);
registerProcessor('live-playback', LivePlayback);
