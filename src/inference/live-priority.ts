// Live streams go ahead of file work in a worker. ONNX Runtime computes on the calling thread, so a file chunk's runs
// (up to 1024 frames each) would hold a live tick for tens of ms; while live streams are open here, file work runs in
// shorter runs and lets the event loop take waiting live ticks between them. Chunking does not change a file's output
// (state is carried between runs), only when its runs happen.
let liveStreams = 0;

/** Frames per file run while live streams are open (~2-4 ms of ONNX Runtime per run on these machines). */
const FILE_FRAMES_WITH_LIVE = 96;

export function setLiveStreams(n: number): void {
  liveStreams = n;
}

/** The most frames a file run may hold now. */
export function fileRunFrames(max: number): number {
  return liveStreams > 0 ? Math.min(max, FILE_FRAMES_WITH_LIVE) : max;
}

/** Between two file runs: with live streams open, a turn of the event loop so that a live tick waiting runs first. */
export function yieldToLive(): Promise<void> | undefined {
  return liveStreams > 0 ? new Promise<void>((resolve) => setImmediate(resolve)) : undefined;
}
