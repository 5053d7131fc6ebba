// Silero VAD's fixed shapes (scripts/vad/silero.ts builds the graph, silero.ts runs it): 16 kHz, one decision per
// 512-sample frame (32 ms) seen with the 64 samples before it, the 4 STFT magnitude frames (256 points, hop 128,
// periodic Hann) of that 576-sample window reflect-padded by 64, and an LSTM of 128 units.
// No onnxruntime-node here: the main thread and the scripts read these too.

/** The graph file `npm run models` writes into models/. */
export const VAD_FILE = 'silero_vad.onnx';
export const VAD_RATE = 16000;
/** Samples per decision. */
export const VAD_FRAME = 512;
/** Samples of the previous frame each window starts with. */
export const VAD_CONTEXT = 64;
export const VAD_WINDOW = VAD_CONTEXT + VAD_FRAME;
/** Reflect padding after the window before the STFT (the reference's F.pad(x, (0, 64), 'reflect')). */
export const VAD_PAD = 64;
export const VAD_STFT_SIZE = 256;
export const VAD_STFT_HOP = 128;
export const VAD_BINS = VAD_STFT_SIZE / 2 + 1;
/** STFT frames per window: (576 + 64 − 256) / 128 + 1. */
export const VAD_STFT_FRAMES = (VAD_WINDOW + VAD_PAD - VAD_STFT_SIZE) / VAD_STFT_HOP + 1;
export const VAD_UNITS = 128;
/** Seconds per decision. */
export const VAD_FRAME_S = VAD_FRAME / VAD_RATE;
