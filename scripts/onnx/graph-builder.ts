// A small builder for ONNX graphs, serialised with the onnx-proto message classes.
import { onnx } from 'onnx-proto';

export const OPSET = 17;
const IR_VERSION = 8;

type Attr = number | number[] | string;

export type Dim = number | string; // numbers are fixed, strings are symbolic (dynamic)

export class GraphBuilder {
  private nodes: onnx.INodeProto[] = [];
  private initializers: onnx.ITensorProto[] = [];
  private inputs: onnx.IValueInfoProto[] = [];
  private outputs: onnx.IValueInfoProto[] = [];
  private counter = 0;

  constructor(readonly name: string) {}

  private valueInfo(name: string, dims: Dim[]): onnx.IValueInfoProto {
    return {
      name,
      type: {
        tensorType: {
          elemType: onnx.TensorProto.DataType.FLOAT,
          shape: { dim: dims.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) },
        },
      },
    };
  }

  input(name: string, dims: Dim[]): string {
    this.inputs.push(this.valueInfo(name, dims));
    return name;
  }

  output(name: string, dims: Dim[]): void {
    this.outputs.push(this.valueInfo(name, dims));
  }

  /** A float32 constant; `data` is row-major for `dims`. */
  constant(hint: string, dims: number[], data: ArrayLike<number>): string {
    const expected = dims.reduce((a, b) => a * b, 1);
    if (data.length !== expected) throw new Error(`${hint}: ${data.length} values for dims [${dims}]`);
    const name = `${hint}_${this.counter++}`;
    const f32 = Float32Array.from(data);
    this.initializers.push({
      name,
      dims,
      dataType: onnx.TensorProto.DataType.FLOAT,
      rawData: new Uint8Array(f32.buffer, f32.byteOffset, f32.byteLength),
    });
    return name;
  }

  int64s(hint: string, values: number[]): string {
    const name = `${hint}_${this.counter++}`;
    const i64 = BigInt64Array.from(values.map((v) => BigInt(v)));
    this.initializers.push({
      name,
      dims: [values.length],
      dataType: onnx.TensorProto.DataType.INT64,
      rawData: new Uint8Array(i64.buffer),
    });
    return name;
  }

  /** Adds a node; returns its output names (fresh unless given). */
  node(opType: string, inputs: string[], attrs: Record<string, Attr> = {}, outputs: number | string[] = 1): string[] {
    const outNames =
      typeof outputs === 'number' ? Array.from({ length: outputs }, () => `${opType.toLowerCase()}_${this.counter++}`) : outputs;
    const attribute: onnx.IAttributeProto[] = Object.entries(attrs).map(([name, v]) => {
      if (typeof v === 'string') return { name, type: onnx.AttributeProto.AttributeType.STRING, s: Buffer.from(v) };
      if (Array.isArray(v)) return { name, type: onnx.AttributeProto.AttributeType.INTS, ints: v };
      if (Number.isInteger(v)) return { name, type: onnx.AttributeProto.AttributeType.INT, i: v };
      return { name, type: onnx.AttributeProto.AttributeType.FLOAT, f: v };
    });
    this.nodes.push({ opType, input: inputs, output: outNames, name: `${opType}_${this.counter++}`, attribute });
    return outNames;
  }

  one(opType: string, inputs: string[], attrs: Record<string, Attr> = {}, output?: string): string {
    return this.node(opType, inputs, attrs, output ? [output] : 1)[0];
  }

  toBytes(docString: string): Uint8Array {
    const model: onnx.IModelProto = {
      irVersion: IR_VERSION,
      producerName: 'noise-suppression-gateway/scripts/convert-models',
      producerVersion: '1.0.0',
      docString,
      opsetImport: [{ domain: '', version: OPSET }],
      graph: {
        name: this.name,
        node: this.nodes,
        initializer: this.initializers,
        input: this.inputs,
        output: this.outputs,
      },
    };
    return onnx.ModelProto.encode(onnx.ModelProto.create(model)).finish();
  }
}
