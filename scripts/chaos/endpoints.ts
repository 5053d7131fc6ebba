// Chaos suite: the API paths the scenarios call.
export const DENOISE = '/v1/noise-suppressor/denoise';
export const BATCH = '/v1/noise-suppressor/denoise/batch';
export const MODELS = '/v1/noise-suppressor/models';
export const JOBS = '/v1/noise-suppressor/jobs';
