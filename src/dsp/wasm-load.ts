// The WebAssembly modules of this layer (built into dist/src/dsp/wasm/ by `npm run build:wasm`), each compiled once per
// thread on first use. A file that is missing or does not compile (no SIMD on this CPU) gives null and a reason, and
// its caller runs its JavaScript loops instead.
import fs from 'node:fs';

const compiled = new Map<string, { module: WebAssembly.Module | null; problem: string | null }>();

/** The compiled module at `file`, or null (then `wasmProblem(file)` says why). */
export function wasmModule(file: string): WebAssembly.Module | null {
  let c = compiled.get(file);
  if (!c) {
    try {
      c = { module: new WebAssembly.Module(fs.readFileSync(file)), problem: null };
    } catch (err) {
      c = { module: null, problem: `${file}: ${(err as Error).message}` };
    }
    compiled.set(file, c);
  }
  return c.module;
}

/** Why the module at `file` did not load (null if it did, or was never asked for). */
export function wasmProblem(file: string): string | null {
  return compiled.get(file)?.problem ?? null;
}
