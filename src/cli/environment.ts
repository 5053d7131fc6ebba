// The configuration as the CLIs load it: a bad variable stops the command with one line (`config: WORKERS must be
// an integer from 1 to 256 (got "1.5")`) and exit status 1, as it stops the servers.
import { ConfigError, loadConfig, type Config } from '../config';

/** Exit status of a command stopped by a bad environment variable. */
export const CONFIG_EXIT = 1;

/** The configuration, or null after writing the one-line reason when a variable is bad. */
export function configOrExplain(writeLine: (line: string) => void, env: NodeJS.ProcessEnv = process.env): Config | null {
  try {
    return loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) {
      writeLine(`config: ${err.message}`);
      return null;
    }
    throw err;
  }
}
