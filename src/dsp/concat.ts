// Joining Float32Array chunks (streaming stages keep a tail of the previous chunk).

export function concat(a: Float32Array, b: Float32Array): Float32Array {
  if (a.length === 0) return b;
  const r = new Float32Array(a.length + b.length);
  r.set(a);
  r.set(b, a.length);
  return r;
}

export function concatAll(parts: Float32Array[]): Float32Array {
  const total = parts.reduce((s, p) => s + p.length, 0);
  const r = new Float32Array(total);
  let o = 0;
  for (const p of parts) {
    r.set(p, o);
    o += p.length;
  }
  return r;
}
