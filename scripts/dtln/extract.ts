// Recovers the layers of a DTLN stage from its single-step TFLite graph by following the data flow:
// LSTM cells (FC(x) + FC(h) + bias → split into 4 gates), the sigmoid dense mask, the 1x1 conv
// encoder/decoder and the instant layer norm. Every structural assumption is checked, so a graph
// of another shape fails loudly instead of converting into something wrong.
import { TfliteGraph, TfliteOperator, TfliteTensor } from '../tflite/reader';

export interface LstmWeights {
  inputSize: number;
  hiddenSize: number;
  /** Keras gate order (i, f, c, o), rows of 4H. */
  kernel: Float32Array; // [4H, in]
  recurrent: Float32Array; // [4H, H]
  bias: Float32Array; // [4H]
  /** Index (in the second axis of the [1, layers, H, 2] state input) and h/c slot of this cell's state. */
  stateLayer: number;
  hSlot: number;
  cSlot: number;
}

export interface DenseWeights {
  inputSize: number;
  outputSize: number;
  weight: Float32Array; // [out, in]
  bias: Float32Array; // [out]
}

export interface Stage1Layers {
  lstms: LstmWeights[];
  mask: DenseWeights;
}

export interface Stage2Layers {
  encoder: DenseWeights; // 1x1 conv 512 → 256
  norm: { gamma: Float32Array; beta: Float32Array; epsilon: number };
  lstms: LstmWeights[];
  mask: DenseWeights;
  decoder: DenseWeights; // 1x1 conv 256 → 512
}

class GraphIndex {
  readonly producer = new Map<number, TfliteOperator>();
  readonly consumers = new Map<number, TfliteOperator[]>();

  constructor(readonly g: TfliteGraph) {
    for (const op of g.operators) {
      op.outputs.forEach((t) => this.producer.set(t, op));
      op.inputs.forEach((t) => {
        if (t < 0) return;
        const list = this.consumers.get(t) ?? [];
        list.push(op);
        this.consumers.set(t, list);
      });
    }
  }
  tensor(i: number): TfliteTensor {
    return this.g.tensors[i];
  }
  isConst(i: number): boolean {
    return i >= 0 && this.g.tensors[i].data !== null;
  }
  floats(i: number): Float32Array {
    const d = this.g.tensors[i].data;
    if (!(d instanceof Float32Array)) throw new Error(`tensor ${this.g.tensors[i].name} is not a float constant`);
    return d;
  }
  ints(i: number): number[] {
    const d = this.g.tensors[i].data;
    if (!d) throw new Error(`tensor ${this.g.tensors[i].name} is not constant`);
    return Array.from(d as ArrayLike<number>);
  }
  from(i: number, op?: string): TfliteOperator {
    const p = this.producer.get(i);
    if (!p) throw new Error(`tensor ${this.tensor(i).name} has no producer`);
    if (op && p.op !== op) throw new Error(`expected ${op} to produce ${this.tensor(i).name}, found ${p.op}`);
    return p;
  }
  usersOf(i: number): TfliteOperator[] {
    return this.consumers.get(i) ?? [];
  }
  /** The one non-constant input and the one constant input of a binary op. */
  splitConst(op: TfliteOperator): { value: number; constant: number } {
    const [a, b] = op.inputs;
    if (this.isConst(a) === this.isConst(b)) throw new Error(`${op.op} does not have exactly one constant input`);
    return this.isConst(a) ? { value: b, constant: a } : { value: a, constant: b };
  }
}

function expect(cond: boolean, what: string): void {
  if (!cond) throw new Error(`unexpected DTLN graph structure: ${what}`);
}

/** Follows a state STRIDED_SLICE back to (layer, slot) in the [1, layers, H, 2] state input. */
function stateSlot(ix: GraphIndex, tensor: number, stateInput: number): { layer: number; slot: number } {
  const op = ix.from(tensor, 'STRIDED_SLICE');
  expect(op.inputs[0] === stateInput, 'recurrent state must be sliced from the state input');
  const begin = ix.ints(op.inputs[1]);
  const end = ix.ints(op.inputs[2]);
  const strides = ix.ints(op.inputs[3]);
  const shrink = op.options.shrinkAxisMask as number;
  expect(strides.every((s) => s === 1), 'state slice strides of 1');
  // Axis 1 (layer) and axis 3 (h/c) must select one element; axis 2 (units) everything.
  expect((shrink & 0b1010) === 0b1010 || (end[1] - begin[1] === 1 && end[3] - begin[3] === 1), 'state slice picks one layer and slot');
  return { layer: begin[1], slot: begin[3] };
}

function extractLstm(ix: GraphIndex, split: TfliteOperator, stateInput: number): { weights: LstmWeights; input: number; output: number } {
  expect(split.outputs.length === 4, 'LSTM gate split into 4');
  const biasAdd = ix.from(split.inputs[1], 'ADD');
  const { value: preBias, constant: biasT } = ix.splitConst(biasAdd);
  const sum = ix.from(preBias, 'ADD');
  const fcs = sum.inputs.map((t) => ix.from(t, 'FULLY_CONNECTED'));
  const isRecurrent = (fc: TfliteOperator) => ix.producer.get(fc.inputs[0])?.op === 'STRIDED_SLICE' && ix.producer.get(fc.inputs[0])?.inputs[0] === stateInput;
  const recFc = fcs.find(isRecurrent);
  const inFc = fcs.find((f) => !isRecurrent(f));
  expect(!!recFc && !!inFc && recFc !== inFc, 'one input and one recurrent matmul');
  for (const fc of fcs) expect(fc.inputs.length < 3 || fc.inputs[2] < 0, 'gate matmuls without bias');
  const kernelT = inFc!.inputs[1];
  const recT = recFc!.inputs[1];
  const [fourH, inputSize] = ix.tensor(kernelT).shape;
  const hiddenSize = fourH / 4;
  expect(ix.tensor(recT).shape[0] === fourH && ix.tensor(recT).shape[1] === hiddenSize, 'recurrent kernel [4H, H]');

  // Keras gate order: i, f, c, o. Check activations and that gate 1 scales the previous cell state.
  const acts = split.outputs.map((t) => ix.usersOf(t).map((u) => u.op));
  expect(acts[0].includes('LOGISTIC') && acts[1].includes('LOGISTIC') && acts[2].includes('TANH') && acts[3].includes('LOGISTIC'), 'gate activations sigmoid, sigmoid, tanh, sigmoid');
  const forget = ix.usersOf(split.outputs[1]).find((u) => u.op === 'LOGISTIC')!;
  const forgetMul = ix.usersOf(forget.outputs[0]).find((u) => u.op === 'MUL');
  expect(!!forgetMul, 'forget gate multiplies the previous cell state');
  const cPrev = forgetMul!.inputs.find((t) => t !== forget.outputs[0])!;
  const h = stateSlot(ix, recFc!.inputs[0], stateInput);
  const c = stateSlot(ix, cPrev, stateInput);
  expect(h.layer === c.layer, 'h and c of the same layer');

  // Output h = o * tanh(c_new): the MUL fed by the output gate's sigmoid.
  const outGate = ix.usersOf(split.outputs[3]).find((u) => u.op === 'LOGISTIC')!;
  const hMul = ix.usersOf(outGate.outputs[0]).find((u) => u.op === 'MUL');
  expect(!!hMul, 'output gate multiplies tanh(c)');

  return {
    weights: {
      inputSize,
      hiddenSize,
      kernel: ix.floats(kernelT),
      recurrent: ix.floats(recT),
      bias: ix.floats(biasT),
      stateLayer: h.layer,
      hSlot: h.slot,
      cSlot: c.slot,
    },
    input: inFc!.inputs[0],
    output: hMul!.outputs[0],
  };
}

function lstmChain(ix: GraphIndex, stateInput: number): LstmWeights[] {
  const splits = ix.g.operators.filter((o) => o.op === 'SPLIT' && o.outputs.length === 4);
  expect(splits.length === 2, `two LSTM cells (found ${splits.length})`);
  const cells = splits.map((s) => extractLstm(ix, s, stateInput));
  // The second cell must consume the first cell's output (through PACK/UNPACK/RESHAPE only).
  const passThrough = new Set(['PACK', 'UNPACK', 'RESHAPE']);
  let t = cells[1].input;
  while (t !== cells[0].output) {
    const p = ix.from(t);
    expect(passThrough.has(p.op), 'LSTM 2 reads LSTM 1 output');
    t = p.inputs[0];
  }
  return cells.map((c) => c.weights);
}

function denseBeforeSigmoid(ix: GraphIndex): DenseWeights {
  const fcs = ix.g.operators.filter((o) => o.op === 'FULLY_CONNECTED' && o.inputs.length > 2 && o.inputs[2] >= 0);
  expect(fcs.length === 1, 'one dense layer with bias');
  const fc = fcs[0];
  // dense → (reshape) → sigmoid
  let t = fc.outputs[0];
  for (;;) {
    const users = ix.usersOf(t);
    expect(users.length === 1, 'dense output feeds one op');
    if (users[0].op === 'LOGISTIC') break;
    expect(users[0].op === 'RESHAPE', 'dense → reshape → sigmoid');
    t = users[0].outputs[0];
  }
  const [outputSize, inputSize] = ix.tensor(fc.inputs[1]).shape;
  return { inputSize, outputSize, weight: ix.floats(fc.inputs[1]), bias: ix.floats(fc.inputs[2]) };
}

function conv1x1(ix: GraphIndex, op: TfliteOperator): DenseWeights {
  const [o, kh, kw, i] = ix.tensor(op.inputs[1]).shape;
  expect(kh === 1 && kw === 1, '1x1 convolution');
  expect(op.options.strideW === 1 && op.options.strideH === 1, 'stride 1');
  expect((op.options.fusedActivation as number) === 0, 'linear convolution');
  const bias = op.inputs.length > 2 && op.inputs[2] >= 0 ? ix.floats(op.inputs[2]) : new Float32Array(o);
  return { inputSize: i, outputSize: o, weight: ix.floats(op.inputs[1]), bias };
}

function stateInputOf(g: TfliteGraph): number {
  const s = g.inputs.find((i) => g.tensors[i].shape.length === 4);
  if (s === undefined) throw new Error('no [1, layers, H, 2] state input');
  return s;
}

export function extractStage1(g: TfliteGraph): Stage1Layers {
  const ix = new GraphIndex(g);
  const lstms = lstmChain(ix, stateInputOf(g));
  const mask = denseBeforeSigmoid(ix);
  expect(lstms[0].inputSize === mask.outputSize, 'mask has one value per input bin');
  return { lstms, mask };
}

export function extractStage2(g: TfliteGraph): Stage2Layers {
  const ix = new GraphIndex(g);
  const convs = g.operators.filter((o) => o.op === 'CONV_2D');
  expect(convs.length === 2, 'encoder and decoder convolutions');
  const [encoder, decoder] = convs.map((c) => conv1x1(ix, c));
  for (const pad of g.operators.filter((o) => o.op === 'PAD')) {
    expect(ix.ints(pad.inputs[1]).every((v) => v === 0), 'only no-op padding before the 1x1 decoder');
  }
  const rsqrt = g.operators.filter((o) => o.op === 'RSQRT');
  expect(rsqrt.length === 1, 'one instant layer norm');
  const epsAdd = ix.from(rsqrt[0].inputs[0], 'ADD');
  const epsilon = ix.floats(ix.splitConst(epsAdd).constant)[0];
  const normMul = ix.usersOf(rsqrt[0].outputs[0]).find((u) => u.op === 'MUL')!;
  const gammaMul = ix.usersOf(normMul.outputs[0]).find((u) => u.op === 'MUL')!;
  const betaAdd = ix.usersOf(gammaMul.outputs[0]).find((u) => u.op === 'ADD')!;
  expect(!!gammaMul && !!betaAdd, 'layer norm scale and offset');
  const gamma = ix.floats(ix.splitConst(gammaMul).constant);
  const beta = ix.floats(ix.splitConst(betaAdd).constant);
  const lstms = lstmChain(ix, stateInputOf(g));
  const mask = denseBeforeSigmoid(ix);
  expect(encoder.outputSize === gamma.length && lstms[0].inputSize === gamma.length, 'norm width = encoder width');
  expect(mask.outputSize === encoder.outputSize && decoder.inputSize === encoder.outputSize, 'mask/decoder width');
  return { encoder, norm: { gamma, beta, epsilon }, lstms, mask, decoder };
}
