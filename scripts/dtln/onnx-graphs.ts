// Builds sequence versions of the two DTLN stages: the same layers as the single-step TFLite graphs,
// but every op runs over [B, T, ·] and the LSTMs are ONNX LSTM nodes scanning T frames in one call,
// with the recurrent state as graph inputs/outputs so a caller can carry it across chunks.
import { GraphBuilder } from '../onnx/graph-builder';
import { DenseWeights, LstmWeights, Stage1Layers, Stage2Layers } from './extract';

/** Transposes a row-major [rows, cols] matrix. */
function transpose(m: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[c * rows + r] = m[r * cols + c];
  return out;
}

/** Keras gate blocks (i, f, c, o) → ONNX order (i, o, f, c). */
function reorderGates(m: Float32Array, hidden: number, width: number): Float32Array {
  const block = hidden * width;
  const out = new Float32Array(m.length);
  const order = [0, 3, 1, 2]; // ONNX block k takes Keras block order[k]
  order.forEach((src, dst) => out.set(m.subarray(src * block, (src + 1) * block), dst * block));
  return out;
}

function dense(b: GraphBuilder, x: string, d: DenseWeights, hint: string): string {
  const w = b.constant(`${hint}_w`, [d.inputSize, d.outputSize], transpose(d.weight, d.outputSize, d.inputSize));
  const bias = b.constant(`${hint}_b`, [d.outputSize], d.bias);
  return b.one('Add', [b.one('MatMul', [x, w]), bias]);
}

/** Runs the LSTM stack on x [T, B, in]; returns y [T, B, H] and per-layer final states. */
function lstmStack(b: GraphBuilder, xTbf: string, lstms: LstmWeights[], h0: string, c0: string) {
  const hs: string[] = [];
  const cs: string[] = [];
  let x = xTbf;
  lstms.forEach((l, k) => {
    const H = l.hiddenSize;
    const W = b.constant(`lstm${k}_W`, [1, 4 * H, l.inputSize], reorderGates(l.kernel, H, l.inputSize));
    const R = b.constant(`lstm${k}_R`, [1, 4 * H, H], reorderGates(l.recurrent, H, H));
    const bias = new Float32Array(8 * H);
    bias.set(reorderGates(l.bias, H, 1)); // Wb; Rb stays zero (Keras has one bias)
    const B = b.constant(`lstm${k}_B`, [1, 8 * H], bias);
    const starts = b.int64s('s', [k]);
    const ends = b.int64s('e', [k + 1]);
    const axes0 = b.int64s('a', [0]);
    const hInit = b.one('Slice', [h0, starts, ends, axes0]);
    const cInit = b.one('Slice', [c0, starts, ends, axes0]);
    const [y, yh, yc] = b.node('LSTM', [x, W, R, B, '', hInit, cInit], { hidden_size: H, direction: 'forward' }, 3);
    x = b.one('Squeeze', [y, b.int64s('ax', [1])]); // [T, 1, B, H] → [T, B, H]
    hs.push(yh);
    cs.push(yc);
  });
  return { y: x, hs, cs };
}

function stateIo(b: GraphBuilder, layers: number, hidden: number) {
  const h0 = b.input('h0', [layers, 'B', hidden]);
  const c0 = b.input('c0', [layers, 'B', hidden]);
  return { h0, c0 };
}

function stateOutputs(b: GraphBuilder, hs: string[], cs: string[], hidden: number): void {
  b.one('Concat', hs, { axis: 0 }, 'hN');
  b.one('Concat', cs, { axis: 0 }, 'cN');
  b.output('hN', [hs.length, 'B', hidden]);
  b.output('cN', [cs.length, 'B', hidden]);
}

export function buildStage1(layers: Stage1Layers): Uint8Array {
  const b = new GraphBuilder('dtln_stage1');
  const bins = layers.lstms[0].inputSize;
  const H = layers.lstms[0].hiddenSize;
  const mag = b.input('mag', ['B', 'T', bins]);
  const { h0, c0 } = stateIo(b, layers.lstms.length, H);
  const xT = b.one('Transpose', [mag], { perm: [1, 0, 2] });
  const { y, hs, cs } = lstmStack(b, xT, layers.lstms, h0, c0);
  const yB = b.one('Transpose', [y], { perm: [1, 0, 2] });
  b.one('Sigmoid', [dense(b, yB, layers.mask, 'mask')], {}, 'mask');
  b.output('mask', ['B', 'T', bins]);
  stateOutputs(b, hs, cs, H);
  return b.toBytes('DTLN stage 1 (magnitude mask), converted from @vonage/noise-suppression dist/model_1.tflite');
}

export function buildStage2(layers: Stage2Layers): Uint8Array {
  const b = new GraphBuilder('dtln_stage2');
  const block = layers.encoder.inputSize;
  const H = layers.lstms[0].hiddenSize;
  const frames = b.input('frames', ['B', 'T', block]);
  const { h0, c0 } = stateIo(b, layers.lstms.length, H);
  const encoded = dense(b, frames, layers.encoder, 'encoder');
  // Instant layer norm over the feature axis of each frame.
  const mean = b.one('ReduceMean', [encoded], { axes: [-1], keepdims: 1 });
  const centred = b.one('Sub', [encoded, mean]);
  const variance = b.one('ReduceMean', [b.one('Mul', [centred, centred])], { axes: [-1], keepdims: 1 });
  const eps = b.constant('eps', [1], [layers.norm.epsilon]);
  const inv = b.one('Reciprocal', [b.one('Sqrt', [b.one('Add', [variance, eps])])]);
  const gamma = b.constant('gamma', [layers.norm.gamma.length], layers.norm.gamma);
  const beta = b.constant('beta', [layers.norm.beta.length], layers.norm.beta);
  const normed = b.one('Add', [b.one('Mul', [b.one('Mul', [centred, inv]), gamma]), beta]);
  const xT = b.one('Transpose', [normed], { perm: [1, 0, 2] });
  const { y, hs, cs } = lstmStack(b, xT, layers.lstms, h0, c0);
  const yB = b.one('Transpose', [y], { perm: [1, 0, 2] });
  const mask = b.one('Sigmoid', [dense(b, yB, layers.mask, 'mask')]);
  const masked = b.one('Mul', [encoded, mask]);
  const decoded = dense(b, masked, layers.decoder, 'decoder');
  b.one('Identity', [decoded], {}, 'out');
  b.output('out', ['B', 'T', block]);
  stateOutputs(b, hs, cs, H);
  return b.toBytes('DTLN stage 2 (learned-basis stage), converted from @vonage/noise-suppression dist/model_2.tflite');
}
