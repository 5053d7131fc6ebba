// Output formats: what each `output_format` value means for the encoder (the bundled ffmpeg's libmp3lame, libopus
// and native AAC), its container, content type, channel and sample-rate limits, and bitrate.
//
//   format  file   codec (container)          bitrate (per channel, capped)        rates
//   wav     .wav   16-bit PCM                 –                                     any
//   flac    .flac  FLAC 16-bit                –                                     any
//   mp3     .mp3   MP3, LAME CBR              64 kb/s per channel (mono 64, stereo 128) 8–48 kHz (MPEG-1/2/2.5)
//   opus    .opus  Opus in Ogg, VBR           32 kb/s per channel (mono 32, stereo 64)  8/12/16/24/48 kHz
//   m4a     .m4a   AAC-LC in MP4 (faststart)  64 kb/s per channel (mono 64, stereo 128) 8–96 kHz
//
// The bitrates are chosen for speech with a clean background: transparent for mono speech at Opus 32 kb/s,
// MP3 64 kb/s and AAC 64 kb/s, with headroom for the full-band nsm-2-hd output. A rate a codec cannot store is
// raised to the next one it can (e.g. Opus stores 44.1 kHz audio at 48 kHz).

export type OutputFormat = 'wav' | 'flac' | 'mp3' | 'opus' | 'm4a';

export interface FormatSpec {
  id: OutputFormat;
  extension: string;
  contentType: string;
  /** Lossy formats get a lower true-peak ceiling when normalising (their decoders overshoot a little). */
  lossy: boolean;
  maxChannels: number;
  /** Sample rates the codec stores; null = any. */
  rates: number[] | null;
  /** Bitrate per channel in bits/s (lossy formats). */
  bitratePerChannel?: number;
  /** Codec and muxer arguments for ffmpeg (after the input and filters). */
  ffmpegArgs(channels: number): string[];
}

const MP3_RATES = [8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000];
const OPUS_RATES = [8000, 12000, 16000, 24000, 48000];
const AAC_RATES = [8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000, 64000, 88200, 96000];

const kbps = (bitsPerChannel: number, channels: number, cap: number) => `${Math.min(cap, (bitsPerChannel * channels) / 1000)}k`;

export const FORMATS: Record<OutputFormat, FormatSpec> = {
  wav: {
    id: 'wav',
    extension: 'wav',
    contentType: 'audio/wav',
    lossy: false,
    maxChannels: 65535,
    rates: null,
    ffmpegArgs: () => ['-c:a', 'pcm_s16le', '-rf64', 'auto', '-f', 'wav'],
  },
  flac: {
    id: 'flac',
    extension: 'flac',
    contentType: 'audio/flac',
    lossy: false,
    maxChannels: 8,
    rates: null,
    ffmpegArgs: () => ['-c:a', 'flac', '-sample_fmt', 's16', '-f', 'flac'],
  },
  mp3: {
    id: 'mp3',
    extension: 'mp3',
    contentType: 'audio/mpeg',
    lossy: true,
    maxChannels: 2,
    rates: MP3_RATES,
    bitratePerChannel: 64000,
    ffmpegArgs: (ch) => ['-c:a', 'libmp3lame', '-b:a', kbps(64000, ch, 320), '-id3v2_version', '0', '-f', 'mp3'],
  },
  opus: {
    id: 'opus',
    extension: 'opus',
    contentType: 'audio/ogg',
    lossy: true,
    maxChannels: 8,
    rates: OPUS_RATES,
    bitratePerChannel: 32000,
    ffmpegArgs: (ch) => ['-c:a', 'libopus', '-b:a', kbps(32000, ch, 512), '-vbr', 'on', '-application', 'audio', '-f', 'opus'],
  },
  m4a: {
    id: 'm4a',
    extension: 'm4a',
    contentType: 'audio/mp4',
    lossy: true,
    maxChannels: 8,
    rates: AAC_RATES,
    bitratePerChannel: 64000,
    ffmpegArgs: (ch) => ['-c:a', 'aac', '-b:a', kbps(64000, ch, 512), '-movflags', '+faststart', '-f', 'ipod'],
  },
};

export const OUTPUT_FORMATS = Object.keys(FORMATS) as OutputFormat[];

export function isOutputFormat(value: string): value is OutputFormat {
  return (OUTPUT_FORMATS as string[]).includes(value);
}

/** The rate the file is written at: `wanted`, or the next rate the codec can store (its highest if none is higher). */
export function encodedRate(format: OutputFormat, wanted: number): number {
  const rates = FORMATS[format].rates;
  if (!rates) return wanted;
  return rates.find((r) => r >= wanted) ?? rates[rates.length - 1];
}

/** True-peak ceiling used when normalising loudness (EBU R128: −1 dBTP; lossy codecs need extra headroom). */
export function truePeakCeiling(format: OutputFormat): number {
  return FORMATS[format].lossy ? -2 : -1;
}
