// Command-line parsing shared by `nsm`, `nsm jobs`, `keys` and `db`: node:util parseArgs underneath, and one style
// for every mistake: `<program>: <what is wrong> (see <program> ... --help)`, exit status 2.
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';

/** A mistake in the command line: reported in one line with where to find help, exit status 2. */
export class UsageError extends Error {}

export const USAGE_EXIT = 2;

export interface OptionSpec {
  type: 'string' | 'boolean';
  short?: string;
  /** Other long names for the same option (e.g. --loudness-lufs for --loudness). */
  aliases?: string[];
}

export interface ParsedLine {
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
}

/**
 * Parses argv against `specs`. parseArgs runs non-strict with tokens so that the checks and their wording are ours:
 * an unknown option, a value-taking option without its value, a flag given a value, and (with `once`) an option
 * given twice are UsageErrors. A value may start with one dash (`--loudness -16`, `-o -`); one starting with two
 * dashes is taken for a forgotten value unless written inline (`--name=--x`). After `--` everything is positional.
 */
export function parseCommandLine(argv: string[], specs: Record<string, OptionSpec>, opts: { once?: boolean } = {}): ParsedLine {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string }> = {};
  const canonical = new Map<string, string>();
  for (const [name, spec] of Object.entries(specs)) {
    options[name] = spec.short ? { type: spec.type, short: spec.short } : { type: spec.type };
    canonical.set(name, name);
    for (const alias of spec.aliases ?? []) {
      options[alias] = { type: spec.type };
      canonical.set(alias, name);
    }
  }
  const { tokens } = parseArgs({ args: argv, options, strict: false, allowPositionals: true, tokens: true });
  const parsed: ParsedLine = { values: {}, positionals: [] };
  for (const token of tokens) {
    if (token.kind === 'positional') {
      parsed.positionals.push(token.value);
      continue;
    }
    if (token.kind !== 'option') continue; // the `--` terminator itself
    const name = canonical.get(token.name);
    if (name === undefined) throw new UsageError(`unknown option ${token.rawName}`);
    let value: string | boolean;
    if (specs[name].type === 'boolean') {
      if (token.inlineValue) throw new UsageError(`${token.rawName} takes no value`);
      value = true;
    } else {
      const given = token.value;
      if (given === undefined || given.trim() === '' || (!token.inlineValue && given.startsWith('--'))) {
        throw new UsageError(`${token.rawName} needs a value`);
      }
      value = given;
    }
    if (opts.once && parsed.values[name] !== undefined) throw new UsageError(`${token.rawName} given twice`);
    parsed.values[name] = value;
  }
  return parsed;
}

/** The value of a string option (undefined when not given). */
export function stringOf(line: ParsedLine, name: string): string | undefined {
  const v = line.values[name];
  return typeof v === 'string' ? v : undefined;
}

export function flag(line: ParsedLine, name: string): boolean {
  return line.values[name] === true;
}

/** The one line a usage error prints. */
export function usageLine(program: string, message: string, helpCommand: string): string {
  return `${program}: ${message} (see ${helpCommand})`;
}

/**
 * Takes one string option out of argv wherever it stands, before the command's own parse: `keys` and `db` accept
 * `--data-dir DIR` (or `--data-dir=DIR`) before or after their command. Stops at `--`. Given twice, or without a
 * value, is a UsageError.
 */
export function takeOption(argv: string[], name: string): { value: string | undefined; rest: string[] } {
  const long = `--${name}`;
  let value: string | undefined;
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--') {
      rest.push(...argv.slice(i));
      break;
    }
    let given: string | undefined;
    if (arg === long) {
      given = argv[i + 1];
      if (given === undefined || given.startsWith('--')) given = '';
      else i++;
    } else if (arg.startsWith(`${long}=`)) {
      given = arg.slice(long.length + 1);
    } else {
      rest.push(arg);
      continue;
    }
    if (given.trim() === '') throw new UsageError(`${long} needs a value`);
    if (value !== undefined) throw new UsageError(`${long} given twice`);
    value = given;
  }
  return { value, rest };
}

/**
 * The environment a `keys` or `db` command loads its configuration from: `--data-dir DIR` stands for DATA_DIR=DIR,
 * resolved as DATA_DIR is (a relative DIR against the working folder; under `npm run`, the clone's folder, as for
 * `npm start`). The rest of argv is the command's.
 */
export function dataDirFromArgs(argv: string[], env: NodeJS.ProcessEnv): { argv: string[]; env: NodeJS.ProcessEnv } {
  const { value, rest } = takeOption(argv, 'data-dir');
  return { argv: rest, env: value === undefined ? env : { ...env, DATA_DIR: value } };
}

/**
 * The refusal when `file` exists and `force` was not given (every CLI that writes a file says it so), or when it is
 * not a regular file at all, `--force` or not: the CLIs write beside their target and rename onto it, which would
 * put a file in the place of a device, a pipe or a socket (`db backup /dev/null --force` as root replaced /dev/null).
 * Null when the file may be written.
 */
export function existingRefusal(file: string, force: boolean): string | null {
  let stat: fs.Stats;
  try {
    stat = fs.statSync(file);
  } catch {
    return null; // nothing there (a dangling link is replaced, as a missing file is written)
  }
  if (stat.isDirectory()) return `${file} is a folder: name a file to write`;
  if (!stat.isFile()) return `${file} is not a regular file (a device, pipe or socket): name a file to write`;
  return force ? null : `${file} exists; pass --force to replace it`;
}

/**
 * Whether two paths name one file: the same path, or (both existing) the same inode, so that an output named by a
 * symbolic or hard link to an input is caught like the same path (the CLIs never write over their inputs).
 */
export function sameFile(a: string, b: string): boolean {
  if (path.resolve(a) === path.resolve(b)) return true;
  try {
    const [x, y] = [fs.statSync(a), fs.statSync(b)];
    return x.dev === y.dev && x.ino === y.ino;
  } catch {
    return false;
  }
}
