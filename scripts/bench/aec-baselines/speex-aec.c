/* Baseline for `npm run bench -- --echo`: speexdsp's echo canceller (MDF) followed by its preprocessor with the echo
 * state attached (the residual echo suppressor), as speexdsp's documentation wires them. Built by scripts/bench/echo.ts
 * with cc when libspeexdsp-dev is installed; never needed by npm test.
 *   speex-aec MIC REF OUT FILTER_SAMPLES [SHIFT]   16 kHz mono float32 raw files in, float32 raw out, same length as
 *   MIC; with SHIFT the reference is delayed by SHIFT samples first (speexdsp has no delay estimator: a client that
 *   knows its playout delay aligns the signals itself).
 * Prints the CPU seconds the processing loop took (clock()), for the bench's cost table. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <speex/speex_echo.h>
#include <speex/speex_preprocess.h>

#define RATE 16000
#define FRAME 160 /* 10 ms */

static float *read_raw(const char *path, long *n) {
  FILE *f = fopen(path, "rb");
  if (!f) { perror(path); exit(2); }
  fseek(f, 0, SEEK_END);
  long bytes = ftell(f);
  fseek(f, 0, SEEK_SET);
  float *x = malloc(bytes + FRAME * sizeof(float));
  if (fread(x, 1, bytes, f) != (size_t)bytes) { perror(path); exit(2); }
  fclose(f);
  *n = bytes / sizeof(float);
  return x;
}

static spx_int16_t to16(float v) {
  float s = roundf(v * 32767.0f);
  return (spx_int16_t)(s > 32767 ? 32767 : s < -32768 ? -32768 : s);
}

int main(int argc, char **argv) {
  if (argc < 5) { fprintf(stderr, "usage: speex-aec MIC REF OUT FILTER_SAMPLES\n"); return 2; }
  long n, nr;
  float *mic = read_raw(argv[1], &n);
  float *ref = read_raw(argv[2], &nr);
  int filter = atoi(argv[4]);
  long shift = argc > 5 ? atol(argv[5]) : 0;
  int rate = RATE;
  SpeexEchoState *echo = speex_echo_state_init(FRAME, filter);
  speex_echo_ctl(echo, SPEEX_ECHO_SET_SAMPLING_RATE, &rate);
  SpeexPreprocessState *pre = speex_preprocess_state_init(FRAME, RATE);
  speex_preprocess_ctl(pre, SPEEX_PREPROCESS_SET_ECHO_STATE, echo);
  float *out = calloc(n + FRAME, sizeof(float));
  spx_int16_t m[FRAME], r[FRAME], o[FRAME];
  clock_t t0 = clock();
  for (long pos = 0; pos < n; pos += FRAME) {
    for (int i = 0; i < FRAME; i++) {
      long k = pos + i;
      m[i] = k < n ? to16(mic[k]) : 0;
      r[i] = k - shift >= 0 && k - shift < nr ? to16(ref[k - shift]) : 0;
    }
    speex_echo_cancellation(echo, m, r, o);
    speex_preprocess_run(pre, o);
    for (int i = 0; i < FRAME && pos + i < n; i++) out[pos + i] = o[i] / 32768.0f;
  }
  double cpu = (double)(clock() - t0) / CLOCKS_PER_SEC;
  FILE *f = fopen(argv[3], "wb");
  if (!f || fwrite(out, sizeof(float), n, f) != (size_t)n) { perror(argv[3]); return 2; }
  fclose(f);
  printf("%.6f\n", cpu);
  speex_preprocess_state_destroy(pre);
  speex_echo_state_destroy(echo);
  return 0;
}
