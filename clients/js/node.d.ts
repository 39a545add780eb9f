import type { Store } from "./index.js";

/** Replace `path` by `data` atomically (temporary file, fsync, rename, fsync of the folder). */
export function writeAtomic(path: string, data: string | Uint8Array): Promise<void>;

/** The Python client's files: the state JSON at `path`, the secret at `path + ".secret"`. */
export class FileStore implements Store {
  constructor(path: string, secretPath?: string);
  readonly path: string;
  readonly secretPath: string;
  secret(): Promise<Uint8Array>;
  load(): Promise<string | null>;
  save(text: string): Promise<void>;
  clear(): Promise<void>;
}
