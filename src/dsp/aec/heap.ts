// This thread's WebAssembly heap for echo cancellers: one memory, and on it one instance each of the row FFT
// (fft-pairs), the partition loops (aec.wasm) and the hop passes (aec-hop.wasm), shared by every canceller made on
// the thread; each canceller's arena is a slot of that memory. Why: with an instance per canceller every new
// canceller brought new function objects to the same call sites, and V8 threw away the optimised code of every
// running canceller ("wrong call target"; docs/echo.md, Live streams). Shared instances keep those sites monomorphic.
//
// A heap's memory never grows once made (the cancellers hold views of it, which a grow would detach): it is made at
// HEAP_BYTES, and a thread that needs more slots at once makes another heap. A slot is given back when its stream
// ends (giveSlot, through EchoCanceller.release()), or else when its canceller is garbage-collected
// (FinalizationRegistry: the path of a canceller nobody released); slots of the same size are reused, zeroed first,
// as a new memory's are.
import { createRowFft, type RowFft } from '../fft-pairs';
import { hopModule, wasmHopPasses, type HopPasses } from './hop-passes';
import { aecKernels, aecModule, type AecKernels } from './kernel';

/** Bytes of one heap's memory: ~130 single-channel cancellers (~0.73 MB each, 0.41 MB of it the prior scale's sums); untouched pages cost no RAM. */
const HEAP_BYTES = 96 << 20;
/** The row FFT's size and rows (the canceller's M and the most rows a hop uses at once: three spectra and the microphone's frame). */
const FFT_N = 256;
const FFT_ROWS = 4;
const HOP = 128;
const PARAMS = 16;

export interface HeapSlot {
  readonly heap: AecHeap;
  /** Byte address of the slot in heap.memory (16-byte aligned). */
  readonly base: number;
  readonly bytes: number;
}

export class AecHeap {
  readonly memory: WebAssembly.Memory;
  readonly fft: RowFft;
  readonly kernels: AecKernels;
  readonly passes: HopPasses;
  /** First byte of the slots, and the first never handed out. */
  private readonly start: number;
  private next: number;
  private readonly free = new Map<number, number[]>();
  /** Slots in use (for tests and diagnostics). */
  used = 0;

  constructor(aecMod: WebAssembly.Module, hopMod: WebAssembly.Module, bytes: number) {
    this.memory = new WebAssembly.Memory({ initial: 1 });
    this.fft = createRowFft(FFT_N, 'wasm', this.memory);
    if (!this.fft.wasm) throw new Error('the echo canceller heap needs the WebAssembly row FFT');
    this.fft.reserve(FFT_ROWS);
    // The scratch call grows the memory to its final size now, before any view of it is handed out.
    // The hop passes' output block (HOP float32) and their scalar parameters (PARAMS float64), then the slots.
    const outBlock = this.fft.wasm.scratch(align64(HOP * 4 + PARAMS * 8) + bytes);
    this.start = align64(outBlock + HOP * 4 + PARAMS * 8);
    this.next = this.start;
    this.kernels = aecKernels(aecMod, this.memory);
    this.passes = wasmHopPasses(hopMod, this.memory, new Float32Array(this.memory.buffer, outBlock, HOP), new Float64Array(this.memory.buffer, outBlock + HOP * 4, PARAMS));
  }

  /** A zeroed slot of `bytes`, or null when this heap has no room. */
  take(bytes: number): number | null {
    const size = align64(bytes);
    const list = this.free.get(size);
    let base: number;
    if (list && list.length > 0) {
      base = list.pop()!;
      new Uint8Array(this.memory.buffer, base, size).fill(0);
    } else {
      if (this.next + size > this.memory.buffer.byteLength) return null;
      base = this.next;
      this.next += size;
    }
    this.used++;
    live++;
    return base;
  }

  give(base: number, bytes: number): void {
    const size = align64(bytes);
    let list = this.free.get(size);
    if (!list) this.free.set(size, (list = []));
    list.push(base);
    this.used--;
    live--;
  }
}

const align64 = (x: number): number => Math.ceil(x / 64) * 64;

/** Slots in use over all of this thread's heaps. */
let live = 0;
/** Cancellers holding a slot on this thread now (canceller.ts prefetches only where many share the caches). */
export function liveSlots(): number {
  return live;
}

const heaps: AecHeap[] = [];
const slots = new FinalizationRegistry<HeapSlot>((s) => s.heap.give(s.base, s.bytes));

/**
 * A slot of `bytes` for `owner` (given back when owner is garbage-collected) in this thread's heaps, a new heap when
 * none has room; null where the WebAssembly modules are missing (the canceller runs its JavaScript loops then).
 */
export function takeSlot(owner: object, bytes: number): HeapSlot | null {
  const aecMod = aecModule();
  const hopMod = hopModule();
  if (!aecMod || !hopMod) return null;
  for (const heap of heaps) {
    const base = heap.take(bytes);
    if (base !== null) return register(owner, { heap, base, bytes });
  }
  const heap = new AecHeap(aecMod, hopMod, Math.max(HEAP_BYTES, align64(bytes)));
  heaps.push(heap);
  return register(owner, { heap, base: heap.take(bytes)!, bytes });
}

function register(owner: object, slot: HeapSlot): HeapSlot {
  slots.register(owner, slot, slot);
  return slot;
}

/**
 * Gives a slot back now (its owner is done with it: it must not touch the slot's memory again, which the next
 * canceller gets zeroed). Once per slot: the garbage collector no longer gives it back a second time.
 */
export function giveSlot(slot: HeapSlot): void {
  if (!slots.unregister(slot)) return; // already given back
  slot.heap.give(slot.base, slot.bytes);
}

/** This thread's heaps (tests, diagnostics). */
export function aecHeaps(): readonly AecHeap[] {
  return heaps;
}
