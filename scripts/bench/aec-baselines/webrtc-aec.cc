// Baseline for `npm run bench -- --echo`: WebRTC's audio processing module as Debian ships it (the 0.3 API, the AEC
// of that generation) with the extended filter and delay-agnostic mode, echo cancellation only (no noise suppression,
// gain control or high-pass filter). Built by scripts/bench/echo.ts with c++ when libwebrtc-audio-processing-dev is
// installed; never needed by npm test.
//   webrtc-aec MIC REF OUT [LEVEL [DELAY_MS]]   16 kHz mono float32 raw in, float32 raw out, same length as MIC;
//     LEVEL 0/1/2 is the suppression level (low, moderate = the default, high); with DELAY_MS the delay-agnostic mode
//     is off and the module is told the bulk delay instead (as a client that knows its playout delay would).
// Prints the CPU seconds the processing loop took (clock()).
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>
#include <webrtc/modules/audio_processing/include/audio_processing.h>

static const int kRate = 16000;
static const int kFrame = 160;  // 10 ms, the module's frame

static std::vector<float> readRaw(const char* path) {
  FILE* f = std::fopen(path, "rb");
  if (!f) { std::perror(path); std::exit(2); }
  std::fseek(f, 0, SEEK_END);
  long bytes = std::ftell(f);
  std::fseek(f, 0, SEEK_SET);
  std::vector<float> x(bytes / sizeof(float));
  if (std::fread(x.data(), sizeof(float), x.size(), f) != x.size()) { std::perror(path); std::exit(2); }
  std::fclose(f);
  return x;
}

int main(int argc, char** argv) {
  if (argc < 4) { std::fprintf(stderr, "usage: webrtc-aec MIC REF OUT [LEVEL]\n"); return 2; }
  std::vector<float> mic = readRaw(argv[1]);
  std::vector<float> ref = readRaw(argv[2]);
  int level = argc > 4 ? std::atoi(argv[4]) : 1;
  int delayMs = argc > 5 ? std::atoi(argv[5]) : -1;
  webrtc::Config config;
  config.Set<webrtc::ExtendedFilter>(new webrtc::ExtendedFilter(true));
  config.Set<webrtc::DelayAgnostic>(new webrtc::DelayAgnostic(delayMs < 0));
  webrtc::AudioProcessing* apm = webrtc::AudioProcessing::Create(config);
  apm->high_pass_filter()->Enable(false);
  apm->noise_suppression()->Enable(false);
  apm->gain_control()->Enable(false);
  apm->echo_cancellation()->enable_drift_compensation(false);
  apm->echo_cancellation()->set_suppression_level(static_cast<webrtc::EchoCancellation::SuppressionLevel>(level));
  if (apm->echo_cancellation()->Enable(true) != 0) { std::fprintf(stderr, "could not enable the AEC\n"); return 1; }
  size_t n = mic.size();
  std::vector<float> out(n);
  float m[kFrame], r[kFrame], o[kFrame];
  const float* mp[1] = {m};
  const float* rp[1] = {r};
  float* op[1] = {o};
  std::clock_t t0 = std::clock();
  for (size_t pos = 0; pos < n; pos += kFrame) {
    for (int i = 0; i < kFrame; i++) {
      size_t k = pos + i;
      m[i] = k < n ? mic[k] : 0.0f;
      r[i] = k < ref.size() ? ref[k] : 0.0f;
    }
    if (apm->AnalyzeReverseStream(rp, kFrame, kRate, webrtc::AudioProcessing::kMono) != 0) return 1;
    apm->set_stream_delay_ms(delayMs < 0 ? 0 : delayMs);
    if (apm->ProcessStream(mp, kFrame, kRate, webrtc::AudioProcessing::kMono, kRate, webrtc::AudioProcessing::kMono, op) != 0) return 1;
    for (int i = 0; i < kFrame && pos + i < n; i++) out[pos + i] = o[i];
  }
  double cpu = static_cast<double>(std::clock() - t0) / CLOCKS_PER_SEC;
  FILE* f = std::fopen(argv[3], "wb");
  if (!f || std::fwrite(out.data(), sizeof(float), n, f) != n) { std::perror(argv[3]); return 2; }
  std::fclose(f);
  std::printf("%.6f\n", cpu);
  delete apm;
  return 0;
}
