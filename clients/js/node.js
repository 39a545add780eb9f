// Node's file store: the same files as the Python client (docs/client.md §1): the state JSON
// at `path` and the secret at `path + ".secret"` ("LLS1" ‖ 32 bytes ‖ first 4 bytes of
// SHA-256("LLS1" ‖ secret)), each replaced atomically (temporary file, fsync, rename, fsync of
// the directory), mode 0600.

import { createHash, randomBytes } from "node:crypto";
import { open, readFile, rename, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";

const MAGIC = Buffer.from("LLS1");
const check = (secret) => createHash("sha256").update(Buffer.concat([MAGIC, secret])).digest().subarray(0, 4);

async function readOrNull(path) {
  try {
    return await readFile(path);
  } catch (err) {
    if (err.code === "ENOENT") return null;
    throw err;
  }
}

/** Replace `path` by `data`: temporary file in the same directory, fsync, rename, fsync dir. */
export async function writeAtomic(path, data) {
  const dir = dirname(path);
  const tmp = join(dir, `.${basename(path)}.${randomBytes(6).toString("hex")}.tmp`);
  const fh = await open(tmp, "wx", 0o600);
  try {
    await fh.writeFile(data);
    await fh.sync();
  } catch (err) {
    await fh.close();
    await unlink(tmp).catch(() => {});
    throw err;
  }
  await fh.close();
  await rename(tmp, path);
  const d = await open(dir, "r");
  try {
    await d.sync();
  } finally {
    await d.close();
  }
}

export class FileStore {
  constructor(path, secretPath = `${path}.secret`) {
    this.path = path;
    this.secretPath = secretPath;
  }
  async secret() {
    const raw = await readOrNull(this.secretPath);
    if (raw === null) {
      const secret = randomBytes(32);
      await writeAtomic(this.secretPath, Buffer.concat([MAGIC, secret, check(secret)]));
      return new Uint8Array(secret);
    }
    const secret = raw.subarray(4, 36);
    if (raw.length !== 40 || !raw.subarray(0, 4).equals(MAGIC) || !raw.subarray(36).equals(check(secret))) {
      throw new TypeError(`device secret ${this.secretPath}: corrupt or not a longldp secret file; refusing to replace it`);
    }
    return new Uint8Array(secret);
  }
  async load() {
    const raw = await readOrNull(this.path);
    return raw === null ? null : raw.toString("utf8");
  }
  async save(text) {
    await writeAtomic(this.path, text);
  }
  async clear() {
    await unlink(this.path).catch((err) => {
      if (err.code !== "ENOENT") throw err;
    });
  }
}
