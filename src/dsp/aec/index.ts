// Acoustic echo cancellation (docs/echo.md): EchoCanceller is the whole canceller; the parts are exported for tests.
export { AEC_HOP, AEC_LATENCY, AEC_SAMPLE_RATE, EchoCanceller, type EchoCancellerOptions, type EchoCancellerStats } from './canceller';
export { warmScene, type WarmScene } from './warm-scene';
