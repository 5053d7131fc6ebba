// File names of the generated ONNX graphs (models/). Kept apart from sessions.ts so that modules the main thread
// loads (the catalogue, the engine, the file pipeline) do not pull in onnxruntime-node: only the worker threads run
// ONNX Runtime, and the main thread (the CLI's start-up included) does not pay for loading its binding.
export const STAGE1_FILE = 'dtln_stage1.onnx';
export const STAGE2_FILE = 'dtln_stage2.onnx';
