// Range requests for files served with Express's sendFile: RFC 9110 §14.1.2 says a suffix range longer than the
// representation selects all of it ("bytes=-999999999" of a 1 MB file is the whole file, 206), while the
// range-parser under Express answers 416 for it. Rewriting such a suffix to "0-" before sendFile gives the RFC's answer.
import type { Request } from 'express';

/** Replaces, in `req`'s Range header, every suffix range longer than `size` bytes by the whole file ("0-"). */
export function clampSuffixRanges(req: Request, size: number): void {
  const range = req.headers.range;
  if (typeof range !== 'string' || size <= 0) return;
  const eq = range.indexOf('=');
  if (eq < 0 || range.slice(0, eq).trim().toLowerCase() !== 'bytes') return;
  const parts = range.slice(eq + 1).split(',');
  let changed = false;
  const clamped = parts.map((part) => {
    const m = /^\s*-\s*(\d+)\s*$/.exec(part);
    // A suffix of 0 bytes stays unsatisfiable; one at most the size is what the parser already serves.
    if (!m || Number(m[1]) <= size) return part;
    changed = true;
    return '0-';
  });
  if (changed) req.headers.range = `${range.slice(0, eq)}=${clamped.join(',')}`;
}
