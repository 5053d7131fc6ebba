// Reads a TFLite flatbuffer (schema v3) into plain objects. Only what the DTLN graphs use is decoded:
// tensors with their constant data, operators with their builtin code and the options we interpret.
// Field numbers follow tensorflow/lite/schema/schema.fbs.
import { ByteBuffer } from 'flatbuffers';

export const BUILTIN_OPS: Record<number, string> = {
  0: 'ADD', 2: 'CONCATENATION', 3: 'CONV_2D', 9: 'FULLY_CONNECTED', 14: 'LOGISTIC', 18: 'MUL', 22: 'RESHAPE',
  28: 'TANH', 34: 'PAD', 39: 'TRANSPOSE', 40: 'MEAN', 41: 'SUB', 42: 'DIV', 43: 'SQUEEZE', 45: 'STRIDED_SLICE',
  49: 'SPLIT', 75: 'SQRT', 76: 'RSQRT', 83: 'PACK', 88: 'UNPACK', 92: 'SQUARE', 99: 'SQUARED_DIFFERENCE',
};

/** TensorType enum values we accept. */
export const TENSOR_TYPES: Record<number, string> = { 0: 'float32', 2: 'int32', 4: 'int64' };

export type FusedActivation = 'NONE' | 'RELU' | 'RELU_N1_TO_1' | 'RELU6' | 'TANH';
const ACTIVATIONS: FusedActivation[] = ['NONE', 'RELU', 'RELU_N1_TO_1', 'RELU6', 'TANH'];

export interface TfliteTensor {
  index: number;
  name: string;
  shape: number[];
  type: string;
  /** Constant contents (weights, shapes); null for activations and graph inputs. */
  data: Float32Array | Int32Array | null;
}

export interface TfliteOperator {
  op: string;
  inputs: number[]; // -1 = optional input left out
  outputs: number[];
  options: Record<string, number | boolean | number[]>;
}

export interface TfliteGraph {
  version: number;
  tensors: TfliteTensor[];
  operators: TfliteOperator[];
  inputs: number[];
  outputs: number[];
}

/** A view of one flatbuffer table. */
class Table {
  constructor(readonly bb: ByteBuffer, readonly pos: number) {}

  private offset(id: number): number {
    const vtable = this.pos - this.bb.readInt32(this.pos);
    const vtableLength = this.bb.readInt16(vtable);
    const slot = 4 + 2 * id;
    return slot < vtableLength ? this.bb.readInt16(vtable + slot) : 0;
  }
  has(id: number): boolean {
    return this.offset(id) !== 0;
  }
  int32(id: number, fallback = 0): number {
    const o = this.offset(id);
    return o ? this.bb.readInt32(this.pos + o) : fallback;
  }
  uint32(id: number, fallback = 0): number {
    const o = this.offset(id);
    return o ? this.bb.readUint32(this.pos + o) : fallback;
  }
  int8(id: number, fallback = 0): number {
    const o = this.offset(id);
    return o ? this.bb.readInt8(this.pos + o) : fallback;
  }
  uint8(id: number, fallback = 0): number {
    const o = this.offset(id);
    return o ? this.bb.readUint8(this.pos + o) : fallback;
  }
  bool(id: number, fallback = false): boolean {
    const o = this.offset(id);
    return o ? this.bb.readUint8(this.pos + o) !== 0 : fallback;
  }
  table(id: number): Table | null {
    const o = this.offset(id);
    if (!o) return null;
    const p = this.pos + o;
    return new Table(this.bb, p + this.bb.readInt32(p));
  }
  private vector(id: number): { start: number; length: number } | null {
    const o = this.offset(id);
    if (!o) return null;
    const p = this.pos + o;
    const v = p + this.bb.readInt32(p);
    return { start: v + 4, length: this.bb.readInt32(v) };
  }
  tables(id: number): Table[] {
    const v = this.vector(id);
    if (!v) return [];
    const out: Table[] = [];
    for (let i = 0; i < v.length; i++) {
      const p = v.start + 4 * i;
      out.push(new Table(this.bb, p + this.bb.readInt32(p)));
    }
    return out;
  }
  int32s(id: number): number[] {
    const v = this.vector(id);
    if (!v) return [];
    const out: number[] = [];
    for (let i = 0; i < v.length; i++) out.push(this.bb.readInt32(v.start + 4 * i));
    return out;
  }
  bytes(id: number): Uint8Array | null {
    const v = this.vector(id);
    if (!v) return null;
    return this.bb.bytes().subarray(v.start, v.start + v.length);
  }
  string(id: number): string | null {
    const b = this.bytes(id);
    return b ? Buffer.from(b).toString('utf8') : null;
  }
}

function decodeOptions(op: string, t: Table | null): Record<string, number | boolean | number[]> {
  if (!t) return {};
  const act = (id: number) => t.int8(id); // ActivationFunctionType code
  switch (op) {
    case 'ADD':
    case 'MUL':
    case 'SUB':
    case 'DIV':
      return { fusedActivation: act(0) };
    case 'FULLY_CONNECTED':
      return { fusedActivation: act(0), weightsFormat: t.int8(1), keepNumDims: t.bool(2) };
    case 'CONV_2D':
      return {
        padding: t.int8(0), strideW: t.int32(1, 1), strideH: t.int32(2, 1), fusedActivation: act(3),
        dilationW: t.int32(4, 1), dilationH: t.int32(5, 1),
      };
    case 'CONCATENATION':
      return { axis: t.int32(0), fusedActivation: act(1) };
    case 'RESHAPE':
      return { newShape: t.int32s(0) };
    case 'SPLIT':
      return { numSplits: t.int32(0) };
    case 'STRIDED_SLICE':
      return {
        beginMask: t.int32(0), endMask: t.int32(1), ellipsisMask: t.int32(2), newAxisMask: t.int32(3),
        shrinkAxisMask: t.int32(4),
      };
    case 'MEAN':
      return { keepDims: t.bool(0) };
    case 'PACK':
      return { valuesCount: t.int32(0), axis: t.int32(1) };
    case 'UNPACK':
      return { num: t.int32(0), axis: t.int32(1) };
    default:
      return {};
  }
}

export function activationName(code: number | boolean | number[] | undefined): FusedActivation {
  return ACTIVATIONS[typeof code === 'number' ? code : 0] ?? 'NONE';
}

export function parseTflite(file: Uint8Array): TfliteGraph {
  const ident = Buffer.from(file.subarray(4, 8)).toString('latin1');
  if (ident !== 'TFL3') throw new Error(`not a TFLite v3 flatbuffer (identifier "${ident}")`);
  const bb = new ByteBuffer(file);
  const model = new Table(bb, bb.readInt32(bb.position()));
  const version = model.uint32(0);
  const opcodes = model.tables(1).map((c) => {
    // builtin_code (field 3) superseded the byte-sized deprecated_builtin_code (field 0) for codes > 127.
    const code = Math.max(c.int8(0), c.int32(3));
    const custom = c.string(1);
    if (custom) throw new Error(`custom operator "${custom}" is not supported`);
    const name = BUILTIN_OPS[code];
    if (!name) throw new Error(`TFLite builtin operator ${code} is not supported by this converter`);
    return name;
  });
  const buffers = model.tables(4);
  const subgraphs = model.tables(2);
  if (subgraphs.length !== 1) throw new Error(`expected one subgraph, found ${subgraphs.length}`);
  const sg = subgraphs[0];

  const tensors: TfliteTensor[] = sg.tables(0).map((t, index) => {
    const typeCode = t.int8(1);
    const type = TENSOR_TYPES[typeCode];
    if (!type) throw new Error(`tensor ${index} has unsupported type ${typeCode}`);
    if (t.table(4)?.has(2)) {
      // quantization.scale present: quantised weights would need dequantising.
      const q = t.table(4)!;
      if (q.bytes(2)?.length) throw new Error(`tensor ${index} is quantised; only float32 graphs are supported`);
    }
    const raw = buffers[t.uint32(2)]?.bytes(0) ?? null;
    let data: Float32Array | Int32Array | null = null;
    if (raw && raw.length) {
      const copy = new Uint8Array(raw); // aligned copy
      if (type === 'float32') data = new Float32Array(copy.buffer, 0, copy.length / 4);
      else if (type === 'int32') data = new Int32Array(copy.buffer, 0, copy.length / 4);
      else {
        const big = new BigInt64Array(copy.buffer, 0, copy.length / 8);
        data = Int32Array.from(big, (v) => Number(v));
      }
    }
    return { index, name: t.string(3) ?? `t${index}`, shape: t.int32s(0), type, data };
  });

  const operators: TfliteOperator[] = sg.tables(3).map((o) => {
    const op = opcodes[o.uint32(0)];
    return { op, inputs: o.int32s(1), outputs: o.int32s(2), options: decodeOptions(op, o.table(4)) };
  });

  return { version, tensors, operators, inputs: sg.int32s(1), outputs: sg.int32s(2) };
}
