// PCM at a stream's edges (PcmDenoiseStream, types.ts), the worker's side: the bytes of whole interleaved frames are
// decoded as the in-process WAV source decodes them (wav.ts decodeFrames), and the chain's output is dithered and
// rounded to 16-bit little-endian PCM as the in-process WAV sink does (dither.ts), so that these per-sample loops run
// in the worker thread with the chain rather than on the server's one main thread (docs/engine.md, "PCM edges").
import { LowFrequencyDither } from '../../dsp/dither';
import { decodeFrames, SAMPLE_BYTES, type WavSampleFormat } from '../../dsp/pcm';

/** One stream's PCM edges: the input's sample format and channel count, and the output's dither state. */
export class PcmEdges {
  private readonly frame: number;
  private readonly dither: LowFrequencyDither;

  constructor(
    private readonly format: WavSampleFormat,
    private readonly channels: number,
    sampleRate: number,
  ) {
    this.frame = SAMPLE_BYTES[format] * channels;
    this.dither = new LowFrequencyDither(sampleRate, channels);
  }

  decode(bytes: Uint8Array): Float32Array[] {
    if (bytes.byteLength % this.frame !== 0) throw new Error(`${bytes.byteLength} bytes are not whole ${this.frame}-byte frames`);
    const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    return decodeFrames(buf, { format: this.format, channels: this.channels, blockAlign: this.frame });
  }

  encode(planar: Float32Array[]): Buffer {
    return this.dither.toInt16(planar);
  }
}
