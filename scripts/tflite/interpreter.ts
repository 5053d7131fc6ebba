// A plain float64 evaluator of a parsed TFLite graph, op by op in file order.
// It exists to check the ONNX conversion independently: it knows nothing of LSTMs or DTLN,
// only the semantics of each TFLite builtin operator.
import { activationName, TfliteGraph, TfliteOperator } from './reader';

export interface NdArray {
  shape: number[];
  data: Float64Array;
}

const size = (shape: number[]) => shape.reduce((a, b) => a * b, 1);

function stridesOf(shape: number[]): number[] {
  const s = new Array<number>(shape.length);
  let acc = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

/**
 * Maps every element of an array of `shape` to an offset in another array: `place(d, idx)` gives the
 * contribution of index `idx` on axis `d` to the destination offset.
 */
function scatterOffsets(shape: number[], place: (axis: number, idx: number) => number): Int32Array {
  const inStr = stridesOf(shape);
  const offsets = new Int32Array(size(shape));
  for (let i = 0; i < offsets.length; i++) {
    let rem = i;
    let dst = 0;
    for (let d = 0; d < shape.length; d++) {
      const idx = Math.floor(rem / inStr[d]);
      rem -= idx * inStr[d];
      dst += place(d, idx);
    }
    offsets[i] = dst;
  }
  return offsets;
}

function applyActivation(x: Float64Array, code: unknown): void {
  const name = activationName(code as number);
  if (name === 'NONE') return;
  for (let i = 0; i < x.length; i++) {
    const v = x[i];
    if (name === 'RELU') x[i] = Math.max(0, v);
    else if (name === 'RELU6') x[i] = Math.min(6, Math.max(0, v));
    else if (name === 'RELU_N1_TO_1') x[i] = Math.min(1, Math.max(-1, v));
    else if (name === 'TANH') x[i] = Math.tanh(v);
  }
}

/** Element-wise binary op with numpy broadcasting. */
function broadcast(a: NdArray, b: NdArray, f: (x: number, y: number) => number): NdArray {
  if (a.data.length === b.data.length && a.shape.join() === b.shape.join()) {
    const out = new Float64Array(a.data.length);
    for (let i = 0; i < out.length; i++) out[i] = f(a.data[i], b.data[i]);
    return { shape: [...a.shape], data: out };
  }
  const rank = Math.max(a.shape.length, b.shape.length);
  const pad = (s: number[]) => [...new Array<number>(rank - s.length).fill(1), ...s];
  const as = pad(a.shape);
  const bs = pad(b.shape);
  const shape = as.map((d, i) => {
    if (d !== bs[i] && d !== 1 && bs[i] !== 1) throw new Error(`cannot broadcast [${a.shape}] with [${b.shape}]`);
    return Math.max(d, bs[i]);
  });
  const aStr = stridesOf(as).map((s, i) => (as[i] === 1 ? 0 : s));
  const bStr = stridesOf(bs).map((s, i) => (bs[i] === 1 ? 0 : s));
  const outStr = stridesOf(shape);
  const out = new Float64Array(size(shape));
  for (let i = 0; i < out.length; i++) {
    let ai = 0;
    let bi = 0;
    let rem = i;
    for (let d = 0; d < rank; d++) {
      const idx = Math.floor(rem / outStr[d]);
      rem -= idx * outStr[d];
      ai += idx * aStr[d];
      bi += idx * bStr[d];
    }
    out[i] = f(a.data[ai], b.data[bi]);
  }
  return { shape, data: out };
}

function unary(a: NdArray, f: (x: number) => number): NdArray {
  return { shape: [...a.shape], data: a.data.map(f) };
}

/** Copies the sub-array selected by per-axis start/stop/step (positive steps). */
function slice(a: NdArray, start: number[], stop: number[], step: number[]): NdArray {
  const shape = start.map((s, i) => Math.max(0, Math.ceil((stop[i] - s) / step[i])));
  const inStr = stridesOf(a.shape);
  const outStr = stridesOf(shape);
  const out = new Float64Array(size(shape));
  for (let i = 0; i < out.length; i++) {
    let rem = i;
    let src = 0;
    for (let d = 0; d < shape.length; d++) {
      const idx = Math.floor(rem / outStr[d]);
      rem -= idx * outStr[d];
      src += (start[d] + idx * step[d]) * inStr[d];
    }
    out[i] = a.data[src];
  }
  return { shape, data: out };
}

function ints(t: NdArray): number[] {
  return Array.from(t.data, (v) => Math.round(v));
}

function normAxis(axis: number, rank: number): number {
  return axis < 0 ? axis + rank : axis;
}

type Eval = (op: TfliteOperator, inp: (i: number) => NdArray) => NdArray[];

const OPS: Record<string, Eval> = {
  ADD: (op, x) => {
    const r = broadcast(x(0), x(1), (a, b) => a + b);
    applyActivation(r.data, op.options.fusedActivation);
    return [r];
  },
  SUB: (op, x) => {
    const r = broadcast(x(0), x(1), (a, b) => a - b);
    applyActivation(r.data, op.options.fusedActivation);
    return [r];
  },
  MUL: (op, x) => {
    const r = broadcast(x(0), x(1), (a, b) => a * b);
    applyActivation(r.data, op.options.fusedActivation);
    return [r];
  },
  DIV: (op, x) => {
    const r = broadcast(x(0), x(1), (a, b) => a / b);
    applyActivation(r.data, op.options.fusedActivation);
    return [r];
  },
  SQUARED_DIFFERENCE: (_op, x) => [broadcast(x(0), x(1), (a, b) => (a - b) * (a - b))],
  LOGISTIC: (_op, x) => [unary(x(0), (v) => 1 / (1 + Math.exp(-v)))],
  TANH: (_op, x) => [unary(x(0), Math.tanh)],
  RSQRT: (_op, x) => [unary(x(0), (v) => 1 / Math.sqrt(v))],
  SQRT: (_op, x) => [unary(x(0), Math.sqrt)],
  SQUARE: (_op, x) => [unary(x(0), (v) => v * v)],
  RESHAPE: (op, x) => {
    const a = x(0);
    let target = op.inputs.length > 1 && op.inputs[1] >= 0 ? ints(x(1)) : (op.options.newShape as number[]);
    target = [...target];
    const known = target.filter((d) => d !== -1).reduce((p, d) => p * d, 1);
    target = target.map((d) => (d === -1 ? a.data.length / known : d));
    if (size(target) !== a.data.length) throw new Error(`reshape [${a.shape}] → [${target}]`);
    return [{ shape: target, data: a.data }];
  },
  FULLY_CONNECTED: (op, x) => {
    const a = x(0);
    const w = x(1); // [out, in]
    const [outDim, inDim] = w.shape;
    const rows = a.data.length / inDim;
    const out = new Float64Array(rows * outDim);
    const bias = op.inputs.length > 2 && op.inputs[2] >= 0 ? x(2) : null;
    for (let r = 0; r < rows; r++) {
      for (let o = 0; o < outDim; o++) {
        let acc = bias ? bias.data[o] : 0;
        for (let k = 0; k < inDim; k++) acc += a.data[r * inDim + k] * w.data[o * inDim + k];
        out[r * outDim + o] = acc;
      }
    }
    applyActivation(out, op.options.fusedActivation);
    const shape = op.options.keepNumDims ? [...a.shape.slice(0, -1), outDim] : [rows, outDim];
    return [{ shape, data: out }];
  },
  CONV_2D: (op, x) => {
    const a = x(0); // NHWC
    const w = x(1); // [O, KH, KW, I]
    const [n, h, wd, c] = a.shape;
    const [o, kh, kw, ci] = w.shape;
    const o1 = op.options;
    if (kh !== 1 || kw !== 1 || o1.strideW !== 1 || o1.strideH !== 1 || ci !== c) {
      throw new Error('only 1x1, stride-1 CONV_2D is supported');
    }
    const bias = op.inputs.length > 2 && op.inputs[2] >= 0 ? x(2) : null;
    const pixels = n * h * wd;
    const out = new Float64Array(pixels * o);
    for (let p = 0; p < pixels; p++) {
      for (let f = 0; f < o; f++) {
        let acc = bias ? bias.data[f] : 0;
        for (let k = 0; k < c; k++) acc += a.data[p * c + k] * w.data[f * c + k];
        out[p * o + f] = acc;
      }
    }
    applyActivation(out, op.options.fusedActivation);
    return [{ shape: [n, h, wd, o], data: out }];
  },
  MEAN: (op, x) => {
    const a = x(0);
    const axes = ints(x(1)).map((ax) => normAxis(ax, a.shape.length));
    const keptShape = a.shape.map((d, i) => (axes.includes(i) ? 1 : d));
    const sum = new Float64Array(size(keptShape));
    const outStr = stridesOf(keptShape);
    const dst = scatterOffsets(a.shape, (d, idx) => (axes.includes(d) ? 0 : idx * outStr[d]));
    for (let i = 0; i < a.data.length; i++) sum[dst[i]] += a.data[i];
    const count = axes.reduce((p, ax) => p * a.shape[ax], 1);
    for (let i = 0; i < sum.length; i++) sum[i] /= count;
    const shape = op.options.keepDims ? keptShape : a.shape.filter((_d, i) => !axes.includes(i));
    return [{ shape, data: sum }];
  },
  PAD: (_op, x) => {
    const a = x(0);
    const p = ints(x(1)); // [rank, 2]
    const shape = a.shape.map((d, i) => d + p[2 * i] + p[2 * i + 1]);
    const out = new Float64Array(size(shape));
    const outStr = stridesOf(shape);
    const dst = scatterOffsets(a.shape, (d, idx) => (idx + p[2 * d]) * outStr[d]);
    for (let i = 0; i < a.data.length; i++) {
      out[dst[i]] = a.data[i];
    }
    return [{ shape, data: out }];
  },
  SPLIT: (op, x) => {
    const a = x(1);
    const axis = normAxis(ints(x(0))[0], a.shape.length);
    const n = op.options.numSplits as number;
    const part = a.shape[axis] / n;
    const outs: NdArray[] = [];
    for (let k = 0; k < n; k++) {
      const start = a.shape.map(() => 0);
      const stop = [...a.shape];
      start[axis] = k * part;
      stop[axis] = (k + 1) * part;
      outs.push(slice(a, start, stop, a.shape.map(() => 1)));
    }
    return outs;
  },
  UNPACK: (op, x) => {
    const a = x(0);
    const axis = normAxis(op.options.axis as number, a.shape.length);
    const outs: NdArray[] = [];
    for (let k = 0; k < a.shape[axis]; k++) {
      const start = a.shape.map(() => 0);
      const stop = [...a.shape];
      start[axis] = k;
      stop[axis] = k + 1;
      const s = slice(a, start, stop, a.shape.map(() => 1));
      outs.push({ shape: a.shape.filter((_d, i) => i !== axis), data: s.data });
    }
    return outs;
  },
  PACK: (op, x) => {
    const parts = op.inputs.map((_i, k) => x(k));
    const base = parts[0].shape;
    const axis = normAxis(op.options.axis as number, base.length + 1);
    const shape = [...base.slice(0, axis), parts.length, ...base.slice(axis)];
    const outer = size(base.slice(0, axis));
    const inner = size(base.slice(axis));
    const out = new Float64Array(size(shape));
    for (let o = 0; o < outer; o++) {
      for (let k = 0; k < parts.length; k++) {
        out.set(parts[k].data.subarray(o * inner, (o + 1) * inner), (o * parts.length + k) * inner);
      }
    }
    return [{ shape, data: out }];
  },
  STRIDED_SLICE: (op, x) => {
    const a = x(0);
    const begin = ints(x(1));
    const end = ints(x(2));
    const strides = ints(x(3));
    const o = op.options as Record<string, number>;
    if (o.ellipsisMask || o.newAxisMask) throw new Error('STRIDED_SLICE with ellipsis/new-axis masks is not supported');
    const start: number[] = [];
    const stop: number[] = [];
    for (let d = 0; d < a.shape.length; d++) {
      const dim = a.shape[d];
      if (strides[d] <= 0) throw new Error('STRIDED_SLICE with non-positive strides is not supported');
      let b = o.beginMask & (1 << d) ? 0 : begin[d];
      let e = o.endMask & (1 << d) ? dim : end[d];
      if (b < 0) b += dim;
      if (e < 0) e += dim;
      if (o.shrinkAxisMask & (1 << d)) e = b + 1;
      start.push(Math.min(Math.max(b, 0), dim));
      stop.push(Math.min(Math.max(e, 0), dim));
    }
    const s = slice(a, start, stop, strides);
    return [{ shape: s.shape.filter((_d, i) => !(o.shrinkAxisMask & (1 << i))), data: s.data }];
  },
};

/** Evaluates the graph once; `inputs` are keyed by the graph input tensors' names. */
export function runTflite(graph: TfliteGraph, inputs: Record<string, NdArray>): Record<string, NdArray> {
  const values = new Map<number, NdArray>();
  for (const t of graph.tensors) {
    if (t.data) values.set(t.index, { shape: t.shape, data: Float64Array.from(t.data as ArrayLike<number>) });
  }
  for (const i of graph.inputs) {
    const t = graph.tensors[i];
    const v = inputs[t.name];
    if (!v) throw new Error(`missing input ${t.name}`);
    if (size(v.shape) !== size(t.shape)) throw new Error(`input ${t.name}: shape [${v.shape}] vs [${t.shape}]`);
    values.set(i, v);
  }
  for (const op of graph.operators) {
    const impl = OPS[op.op];
    if (!impl) throw new Error(`no evaluator for ${op.op}`);
    const get = (k: number) => {
      const v = values.get(op.inputs[k]);
      if (!v) throw new Error(`${op.op}: input ${op.inputs[k]} not computed`);
      return v;
    };
    const outs = impl(op, get);
    op.outputs.forEach((t, k) => values.set(t, outs[k]));
  }
  const result: Record<string, NdArray> = {};
  for (const o of graph.outputs) result[graph.tensors[o].name] = values.get(o)!;
  return result;
}
