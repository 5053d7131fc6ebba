// Command-line options of the development tools that take `--name value` pairs (the echo benches): one reader.

/** `opt(name, def)`: the value after `name` in args, or def where the option or its value is missing. */
export function optionReader(args: string[]): (name: string, def: string) => string {
  return (name, def) => {
    const i = args.indexOf(name);
    return i >= 0 && args[i + 1] ? args[i + 1] : def;
  };
}

/** A `key=value` setting's value: a number where it reads as one, true / false, else the text. */
export function settingValue(v: string): number | boolean | string {
  if (v === 'true' || v === 'false') return v === 'true';
  return Number.isNaN(Number(v)) ? v : Number(v);
}

/** Every `flag key=value` pair in args (e.g. `--set nlEvery=8`), as options: the values read by settingValue. */
export function settingsOf(args: string[], flag: string): Record<string, number | boolean | string> {
  const sets: Record<string, number | boolean | string> = {};
  args.forEach((a, i) => {
    if (a !== flag || !args[i + 1]) return;
    const [k, v] = args[i + 1].split('=');
    sets[k] = settingValue(v);
  });
  return sets;
}
