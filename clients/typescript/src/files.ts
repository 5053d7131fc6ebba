// Upload inputs: a path (Node: a file-backed Blob, read from disk as the upload goes out, never held in memory), a
// Blob or File (browsers), bytes, or any of those with a file name. And the multipart form, built once per attempt.

/** What can be uploaded. A string is a file path (Node only). */
export type FileInput =
  | string
  | Blob
  | Uint8Array
  | ArrayBuffer
  | { data: string | Blob | Uint8Array | ArrayBuffer; filename?: string; contentType?: string };

/** Form field values; undefined and null are left out, booleans sent as true/false. */
export type FieldValue = string | number | boolean | undefined | null;

export interface PreparedFile {
  blob: Blob;
  filename: string;
}

function basename(p: string): string {
  return p.split(/[\\/]/).pop() || 'audio';
}

async function fromPath(path: string): Promise<Blob> {
  const fs = (await import('node:fs')) as typeof import('node:fs');
  if (typeof fs.openAsBlob !== 'function') {
    // Older runtimes: read it whole.
    return new Blob([await fs.promises.readFile(path)]);
  }
  return fs.openAsBlob(path);
}

function bytesBlob(data: Uint8Array | ArrayBuffer, type?: string): Blob {
  return new Blob([data as BlobPart], type ? { type } : undefined);
}

/** The Blob and file name to upload for an input. */
export async function prepareFile(input: FileInput, fallbackName = 'audio'): Promise<PreparedFile> {
  if (typeof input === 'string') return { blob: await fromPath(input), filename: basename(input) };
  if (input instanceof Blob) {
    const name = (input as Blob & { name?: unknown }).name;
    return { blob: input, filename: typeof name === 'string' && name ? name : fallbackName };
  }
  if (input instanceof Uint8Array || input instanceof ArrayBuffer) return { blob: bytesBlob(input), filename: fallbackName };
  const inner = await prepareFile(input.data, fallbackName);
  const blob = input.contentType && !(input.data instanceof Blob) ? bytesBlob(new Uint8Array(await inner.blob.arrayBuffer()), input.contentType) : inner.blob;
  return { blob, filename: input.filename ?? inner.filename };
}

/** A multipart form: the fields, then the files under `fileField`, then `more` (each under its own field name). */
export function buildForm(fileField: string, files: PreparedFile[], fields: Record<string, FieldValue>, more: Array<[string, PreparedFile]> = []): FormData {
  const form = new FormData();
  // Fields first: the jobs endpoint checks the fields that precede the file before it stores the upload.
  for (const [k, v] of Object.entries(fields)) if (v !== undefined && v !== null) form.append(k, String(v));
  for (const f of files) form.append(fileField, f.blob, f.filename);
  for (const [field, f] of more) form.append(field, f.blob, f.filename);
  return form;
}

/** Takes `echoReference` out of call options: the other fields, and the reference as the `echo_reference` part. */
export async function withEchoReference(options: { echoReference?: FileInput } & Record<string, unknown>): Promise<{ fields: Record<string, FieldValue>; more: Array<[string, PreparedFile]> }> {
  const { echoReference, ...fields } = options;
  const more: Array<[string, PreparedFile]> = echoReference === undefined ? [] : [['echo_reference', await prepareFile(echoReference, 'reference')]];
  return { fields: fields as Record<string, FieldValue>, more };
}
