// Client-supplied file names are untrusted: they become output names in zips and Content-Disposition headers.

// Characters that must never reach a file name, a zip entry or a header: C0/C1 controls (Cc); invisible format
// characters (Cf), among them the bidi embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069) and marks
// (U+200E, U+200F, U+061C) that make "evil\u202Egnp.exe" display as "evilexe.png", zero-width space, BOM, soft
// hyphen and tag characters; line/paragraph separators (Zl, Zp); lone surrogates (Cs). ZWNJ and ZWJ (U+200C, U+200D)
// stay: they are part of how Persian, Indic scripts and emoji sequences are spelled and reorder nothing.
const CONTROL_CHARS = /(?![\u200c\u200d])[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/gu;
const UNSAFE_CHARS = /[<>:"|?*]/g;
const MAX_BASE_LENGTH = 120;

/** The client's name with directories and control characters removed (for display in manifests). */
export function cleanInputName(original: string | undefined): string {
  const withoutControls = (original ?? '').replace(CONTROL_CHARS, '');
  const lastSegment = withoutControls.split(/[\\/]/).pop() ?? '';
  return lastSegment.trim();
}

/**
 * Base name (no directory, no extension) safe to use as a file name:
 * `../../x/My Talk.wav` → `My Talk`; names that reduce to nothing become `audio`.
 */
export function safeBaseName(original: string | undefined): string {
  let name = cleanInputName(original).replace(UNSAFE_CHARS, '_');
  const dot = name.lastIndexOf('.');
  if (dot > 0) name = name.slice(0, dot);
  // Leading dots would make hidden files or `..`; trailing dots/spaces are stripped by Windows.
  name = name.replace(/^[.\s]+/, '').replace(/[.\s]+$/, '');
  if (name.length > MAX_BASE_LENGTH) name = Array.from(name).slice(0, MAX_BASE_LENGTH).join('');
  return name || 'audio';
}

/** Hands out `<base>_denoised.<ext>`, then `<base>_denoised_2.<ext>`, ... so no two outputs share a name. */
export class OutputNamer {
  private readonly taken = new Set<string>();

  take(base: string, ext: string): string {
    for (let n = 1; ; n++) {
      const name = n === 1 ? `${base}_denoised.${ext}` : `${base}_denoised_${n}.${ext}`;
      // Case-insensitive: zips are often extracted onto case-insensitive file systems.
      const key = name.toLowerCase();
      if (!this.taken.has(key)) {
        this.taken.add(key);
        return name;
      }
    }
  }
}

/** RFC 5987 ext-value encoding (percent-encode everything outside attr-char). */
function encodeRfc5987(value: string): string {
  return encodeURIComponent(value).replace(/['()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());
}

/** `attachment; filename="<ascii>"` plus `filename*=UTF-8''...` when the name is not plain ASCII. */
export function contentDisposition(name: string): string {
  const filename = name.replace(CONTROL_CHARS, '');
  const ascii = filename.replace(/[^\x20-\x7e]/g, '_').replace(/["\\]/g, '_');
  let header = `attachment; filename="${ascii}"`;
  if (ascii !== filename) header += `; filename*=UTF-8''${encodeRfc5987(filename)}`;
  return header;
}

/** JSON for a response header: non-ASCII escaped so the header value stays valid. */
export function headerJson(value: unknown): string {
  return JSON.stringify(value).replace(/[^\x20-\x7e]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}
